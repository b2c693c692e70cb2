/**
 * What `startService` says at start-up on the memory store: with no rules at all it warns
 * that everything is allowed (as upstream's file loader does), naming why nothing was read.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { PolicyError } from '../../src/core/errors.js';
import { startService } from '../../src/service/main.js';
import { captureLog, LOG_LEVEL } from '../support/captured-log.js';

const dir = mkdtempSync(join(tmpdir(), 'sluice-start-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

async function startedWith(options: Parameters<typeof startService>[0]) {
  const log = captureLog();
  const svc = await startService({
    host: '127.0.0.1',
    grpcHost: '127.0.0.1',
    port: 0,
    grpcPort: 0,
    logger: log.logger,
    ...options,
  });
  await svc.shutdown();
  return log;
}

const NO_CONFIG = 'no rate limit config loaded: every request is allowed';

describe('serve with no config', () => {
  it('warns once that every request is allowed, naming why nothing was read', async () => {
    const log = await startedWith({ env: {} }); // upstream's defaults: RUNTIME_SUBDIRECTORY empty
    const warned = log.matching(NO_CONFIG);
    expect(warned).toHaveLength(1);
    expect(warned[0]!['level']).toBe(LOG_LEVEL.warn);
    expect(warned[0]!['reasons']).toEqual([
      'RUNTIME_ROOT or RUNTIME_SUBDIRECTORY is empty: no config is loaded',
    ]);
  });

  it('warns for a runtime directory that does not exist', async () => {
    const log = await startedWith({
      env: { RUNTIME_ROOT: join(dir, 'missing'), RUNTIME_SUBDIRECTORY: 'ratelimit' },
    });
    const warned = log.matching(NO_CONFIG);
    expect(warned).toHaveLength(1);
    expect(String((warned[0]!['reasons'] as string[])[0])).toContain('ENOENT');
  });

  it('says nothing of the kind when rules are loaded', async () => {
    const file = join(dir, 'config.yaml');
    writeFileSync(
      file,
      'domain: d\ndescriptors:\n  - key: k\n    rate_limit: { unit: second, requests_per_unit: 1 }\n',
    );
    const log = await startedWith({ envoyConfig: file });
    expect(log.matching(NO_CONFIG)).toEqual([]);
    expect(log.matching('sluice serving')).toHaveLength(1);
  });
});

describe('startService options', () => {
  it('are checked by the rules of the variables that set them, every problem at once', async () => {
    const refused = await startService({
      envoyConfig: join(dir, 'none.yaml'),
      storeTimeoutMs: 0,
      port: 70_000,
      nearLimitRatio: 1.5,
      maxDescriptorValueLength: 0,
      httpKeepAliveTimeoutMs: 1.5,
    }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(refused).toBeInstanceOf(PolicyError);
    expect((refused as PolicyError).code).toBe('SLUICE_ERR_CONFIG_INVALID');
    expect((refused as PolicyError).issues.map((i) => i.path)).toEqual([
      'port',
      'storeTimeoutMs',
      'maxDescriptorValueLength',
      'httpKeepAliveTimeoutMs',
      'nearLimitRatio',
    ]);
    expect((refused as PolicyError).message).toContain(
      'storeTimeoutMs: expected a whole number of milliseconds from 1 to 60000, got "0"',
    );
  });

  it('refuse keys ServeOptions does not have, naming each and what replaced a renamed one', async () => {
    // A spread or a JavaScript caller gets past the excess-property check; an ignored
    // `redisUrl` would start the service on its memory store.
    const given: Record<string, unknown> = {
      host: '127.0.0.1',
      port: 0,
      redisUrl: 'redis://127.0.0.1:1',
      grpcPorts: 0,
    };
    const refused = await startService(given as Parameters<typeof startService>[0]).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(refused).toBeInstanceOf(PolicyError);
    expect((refused as PolicyError).code).toBe('SLUICE_ERR_CONFIG_INVALID');
    expect((refused as PolicyError).issues).toEqual([
      {
        path: 'redisUrl',
        message: `startService has no option "redisUrl" (now redis: { type: 'single', url })`,
      },
      { path: 'grpcPorts', message: 'startService has no option "grpcPorts"' },
    ]);
  });
});
