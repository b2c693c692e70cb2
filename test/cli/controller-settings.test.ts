/**
 * `sluice controller` refuses settings that cannot work before it opens a port or
 * connects to Redis: the CLI spawned, each problem named by its flag, no stack trace.
 * The Redis address is a closed loopback port, so a start that got past the settings
 * would show as a different failure.
 */
import { describe, expect, it } from 'vitest';
import { freePort } from '../support/free-port.js';
import { runSluice } from './run-sluice.js';

async function controller(...flags: string[]) {
  const redis = `redis://127.0.0.1:${await freePort()}`;
  return runSluice([
    'controller',
    ...['--redis', redis, '--id', 'c1', '--domain', 'd', '--port', '0'],
    ...flags,
  ]);
}

describe('sluice controller settings', () => {
  it.each([
    [['--budget', 'name=api@100', '--refresh-ms', '1'], '--refresh-ms: must be at least 100'],
    [
      ['--budget', 'name=api@100', '--election-ttl-ms', '1'],
      '--election-ttl-ms: must be at least 300',
    ],
    [
      ['--budget', 'name=api@100', '--refresh-ms', '1000', '--lease-ttl-ms', '500'],
      '--lease-ttl-ms: must be at least --refresh-ms (1000)',
    ],
    [
      ['--budget', 'name=api@100', '--lease-ttl-ms', '3000', '--election-ttl-ms', '3000'],
      '--election-ttl-ms: must be below the lease TTL (3000)',
    ],
    [
      ['--budget', 'name=api@1e308'],
      '--budget: name=api@1e+308: a lease cannot carry more than 4294967295 units per second',
    ],
    [
      ['--budget', 'name=api@100', '--refresh-ms', '100', '--max-reports-per-second', '5'],
      '--max-reports-per-second: must be at least 10: agents report every --refresh-ms (100)',
    ],
    [
      ['--budget', 'name=api@100', '--max-buckets-per-agent', '10'],
      '--max-buckets-per-agent: must be at least --max-buckets-per-message (1000)',
    ],
    [
      ['--budget', 'name=api@100', '--max-bucket-value-bytes', '2'],
      '--max-bucket-value-bytes: --budget name=api: value "api" is 3 bytes, above 2',
    ],
  ])('refuses %j at start, naming the flag', async (flags, message) => {
    const r = await controller(...flags);
    expect(r.stderr).toContain(message);
    expect(r.stderr).toContain('[SLUICE_ERR_QUOTA_CONFIG_INVALID]');
    expect(r.stderr).not.toMatch(/\n\s+at /);
    // Exit 1: an invalid setting (docs/cli.md, exit codes).
    expect(r.code).toBe(1);
  });

  it('names every problem at once', async () => {
    const r = await controller('--budget', 'name=api@1e308', '--refresh-ms', '1');
    expect(r.stderr).toContain('sluice: 2 problems [SLUICE_ERR_QUOTA_CONFIG_INVALID]');
    expect(r.stderr).toContain('--refresh-ms');
    expect(r.stderr).toContain('--budget');
  });
});
