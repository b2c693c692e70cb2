import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { findRule, loadEnvoyConfigFiles } from '../../../src/config/envoy/index.js';

describe('docs/envoy-config.md', () => {
  const doc = readFileSync(join(import.meta.dirname, '../../../docs/envoy-config.md'), 'utf8');
  const yaml = /```yaml\n([\s\S]*?)```/.exec(doc)?.[1] ?? '';

  it('the opening example loads and matches as its comment says', () => {
    const config = loadEnvoyConfigFiles([{ name: 'messaging.yaml', text: yaml }], {
      mergeDomainConfig: false,
    });
    const match = findRule(config, 'messaging', [{ key: 'to_number', value: '2061111111' }]);
    expect(match?.rule.requestsPerUnit).toBe(100);
    expect(match?.statsKey).toBe('messaging.to_number');
    expect(match?.rule.sluice).toMatchObject({
      algorithm: 'token-bucket',
      burst: 20,
      failureMode: 'closed',
      name: 'messaging-per-number',
    });
    expect(doc).toContain(
      "match.rule.requestsPerUnit === 100, match.statsKey === 'messaging.to_number'",
    );
  });

  it('the Counting example loads with its domain decided all-or-nothing', () => {
    const counting = doc.slice(doc.indexOf('## Counting'));
    const text = /```yaml\n([\s\S]*?)```/.exec(counting)?.[1] ?? '';
    const config = loadEnvoyConfigFiles([{ name: 'messaging.yaml', text }], {
      mergeDomainConfig: false,
    });
    expect(config.domains.messaging?.decision).toBe('all-or-nothing');
  });
});
