import { optionalSetting, setting } from './setting.js';
import { anyText, goBool, nonEmptyText, wholeNumber } from '../../config/env-values.js';
import { type LeaseFallback } from '../../quota/lease.js';
import { MAX_LEASE_REFRESH_MS, controllerList, leaseFallback, nameList } from './values.js';

/** Quota leases from `sluice controller`s (docs/quota-leases.md). */
export const LEASE_SETTINGS = {
  leaseControllers: optionalSetting({
    env: 'SLUICE_LEASE_CONTROLLERS',
    value: controllerList,
    target: 'leases.controllers',
    opens: 'leases',
    on: (v) => v !== undefined,
    flags: [
      {
        spec: '--lease-controllers <host:port,...>',
        help: 'take quota leases from these `sluice controller`s, tried in turn',
      },
    ],
    allowed:
      '`host:port` addresses, comma-separated: take quota leases from these `sluice controller`s, tried in turn ([leases](#quota-leases))',
    shownDefault: 'unset: no leases',
    upstream: false,
  }),
  leasePolicies: optionalSetting({
    env: 'SLUICE_LEASE_POLICIES',
    value: nameList,
    target: 'leases.policies',
    flags: [
      {
        spec: '--lease-policies <name,...>',
        help: 'the rules or policies decided by a lease, by public name',
      },
    ],
    allowed:
      'rule or policy names (public names), comma-separated; required with, and only with, `SLUICE_LEASE_CONTROLLERS`',
    shownDefault: 'none',
    upstream: false,
  }),
  leaseDomain: setting({
    env: 'SLUICE_LEASE_DOMAIN',
    value: nonEmptyText('a non-empty RLQS domain'),
    default: 'sluice',
    target: 'leases.domain',
    flags: [
      {
        spec: '--lease-domain <domain>',
        help: "the controller's --domain",
      },
    ],
    allowed: "non-empty: the RLQS domain, the controller's `--domain`",
    shownDefault: '`sluice`',
    upstream: false,
  }),
  leaseAgent: setting({
    env: 'SLUICE_LEASE_AGENT',
    value: anyText,
    default: '',
    target: 'leases.agent',
    omitEmpty: true,
    flags: [
      {
        spec: '--lease-agent <name>',
        help: 'this instance among the agents',
      },
    ],
    allowed:
      "any text: this instance's agent name, unique in the fleet; never a fixed name in a template shared by instances (empty: the default)",
    shownDefault: '`<hostname>-<pid>-<random>`',
    upstream: false,
  }),
  leaseRefreshMs: setting({
    env: 'SLUICE_LEASE_REFRESH_MS',
    value: wholeNumber(1, MAX_LEASE_REFRESH_MS, ' of milliseconds'),
    default: 1_000,
    target: 'leases.refreshMs',
    flags: [
      {
        spec: '--lease-refresh <ms>',
        help: "report period and lease window, the controller's --refresh-ms",
      },
    ],
    allowed:
      "a whole number of milliseconds, 1-60000: report period and lease window R, the controller's `--refresh-ms` (the controller's own, when it differs, is followed and the mismatch logged)",
    shownDefault: '1000',
    upstream: false,
  }),
  leaseTtlMs: optionalSetting({
    env: 'SLUICE_LEASE_TTL_MS',
    value: wholeNumber(1, 2 ** 31 - 1, ' of milliseconds'),
    target: 'leases.maxTtlMs',
    flags: [
      {
        spec: '--lease-ttl <ms>',
        help: 'the longest a lease is held',
      },
    ],
    allowed:
      'a whole number of milliseconds, at least R: the longest a lease is held once received',
    shownDefault: "the controller's TTL",
    upstream: false,
  }),
  leaseFallback: setting({
    env: 'SLUICE_LEASE_FALLBACK',
    value: leaseFallback,
    default: Object.freeze({ kind: 'deny' }) as LeaseFallback,
    target: 'leases.fallback',
    flags: [
      {
        spec: '--lease-fallback <deny|store|rate>',
        help: 'without a lease in force: deny, the store, or a static rate per second',
      },
    ],
    allowed:
      '`deny`, `store`, or a number ≥ 0: a static rate in units per second; applies with no lease in force',
    shownDefault: '`deny`',
    upstream: false,
  }),
  leaseTokenFile: setting({
    env: 'SLUICE_LEASE_TOKEN_FILE',
    value: anyText,
    default: '',
    target: 'leases.tokenFile',
    omitEmpty: true,
    flags: [
      {
        spec: '--lease-token-file <file>',
        help: "a file holding this instance's bearer token for the controllers, read at each connect",
      },
    ],
    allowed:
      'a file holding the bearer token sent to the controllers (`authorization: Bearer`), read at start and at each connect',
    shownDefault: 'none',
    upstream: false,
  }),
  leaseTls: setting({
    env: 'SLUICE_LEASE_TLS',
    value: goBool,
    default: false,
    opens: 'leases.tlsFiles',
    allowed:
      'a boolean: TLS to the controllers (`sluice controller --tls-cert`, or a TLS proxy or mesh in front of it)',
    shownDefault: 'false',
    upstream: false,
  }),
  leaseTlsCaCert: setting({
    env: 'SLUICE_LEASE_TLS_CACERT',
    value: anyText,
    default: '',
    target: 'leases.tlsFiles.caCertFile',
    allowed: "with TLS: a PEM file of CAs the controller's certificate is checked against",
    shownDefault: "the system's",
    upstream: false,
  }),
  leaseTlsClientCert: setting({
    env: 'SLUICE_LEASE_TLS_CLIENT_CERT',
    value: anyText,
    default: '',
    target: 'leases.tlsFiles.clientCertFile',
    allowed: 'with TLS: a PEM client certificate, for mutual TLS; needs the key',
    shownDefault: 'none',
    upstream: false,
  }),
  leaseTlsClientKey: setting({
    env: 'SLUICE_LEASE_TLS_CLIENT_KEY',
    value: anyText,
    default: '',
    target: 'leases.tlsFiles.clientKeyFile',
    allowed: 'with TLS: its PEM private key',
    shownDefault: 'none',
    upstream: false,
  }),
  leaseTlsSan: setting({
    env: 'SLUICE_LEASE_TLS_SAN',
    value: anyText,
    default: '',
    target: 'leases.tlsFiles.serverName',
    allowed:
      "with TLS: the name the controller's certificate must carry, when not the address's host",
    shownDefault: "the address's host",
    upstream: false,
  }),
} as const;
