import { describe, expect, it } from 'vitest';
import { loadEnvoyConfigFiles } from '../../src/config/envoy/load.js';
import { parsePolicyText } from '../../src/config/load.js';
import { leasedPolicyProblems } from '../../src/service/leased-policies.js';

// Which rules and policies can take a quota lease: those loaded whose every bucket is one.
const envoy = loadEnvoyConfigFiles([
  {
    name: 'edge.yaml',
    text: `domain: edge
descriptors:
  - key: generic_key
    value: global
    rate_limit: { unit: second, requests_per_unit: 100 }
    sluice: { name: global-api }
    descriptors:
      - key: tenant
        rate_limit: { unit: second, requests_per_unit: 10 }
        sluice: { name: per-tenant-under-global }
  - key: path
    value: /api/*
    rate_limit: { unit: second, requests_per_unit: 50 }
    sluice: { name: api-paths }
  - key: path
    value: /shared/*
    share_threshold: true
    rate_limit: { unit: second, requests_per_unit: 50 }
    sluice: { name: shared-paths }
`,
  },
]);
const policies = parsePolicyText(
  `policies:
  - name: fixed
    match: [{ key: region, value: eu }]
    algorithm: token-bucket
    rate: 10
    period: 1s
    burst: 10
  - name: per-route
    match: [{ key: route }]
    algorithm: token-bucket
    rate: 10
    period: 1s
    burst: 10
`,
  'policies.yaml',
);

describe('leasedPolicyProblems', () => {
  it('accepts rules and policies with one bucket: fixed values, or a shared wildcard', () => {
    expect(leasedPolicyProblems(['global-api', 'shared-paths', 'fixed'], envoy, policies)).toEqual(
      [],
    );
  });

  it('refuses a name not loaded, and one with a bucket per value, saying where the values vary', () => {
    expect(
      leasedPolicyProblems(
        ['nope', 'per-tenant-under-global', 'api-paths', 'per-route'],
        envoy,
        policies,
      ),
    ).toEqual([
      'no rule or policy named "nope" is loaded; loaded: fixed, per-route, global-api, per-tenant-under-global, api-paths, shared-paths',
      '"per-tenant-under-global" has a bucket per value (edge.yaml: descriptors[0].descriptors[0] (key "tenant") has no value); a lease is one budget for the whole rule, so lease a rule whose descriptors all have fixed values',
      '"api-paths" has a bucket per value (edge.yaml: descriptors[1] (key "path") has a wildcard value); a lease is one budget for the whole rule, so lease a rule whose descriptors all have fixed values',
      '"per-route" has a bucket per value (match key "route" has no value); a lease is one budget for the whole rule, so lease a rule whose descriptors all have fixed values',
    ]);
  });
});
