/**
 * The per-second limiter (upstream's REDIS_PERSECOND) runs the same stages as the main
 * one: a rule whose unit is second uses the over-limit cache, and closing the service
 * gives its unspent batch units back to the per-second store. Each case is run against
 * the main store alone and against a per-second store beside it: both must agree.
 * The stores are real MemoryStores, counted.
 */
import { describe, expect, it } from 'vitest';
import { buildEnvoyConfig } from '../../src/config/envoy/build.js';
import { parseEnvoyConfigYaml } from '../../src/config/envoy/load.js';
import { ManualClock } from '../../src/core/clock.js';
import { RateLimitService } from '../../src/service/rate-limit-service.js';
import { MemoryStore } from '../../src/stores/memory/memory-store.js';
import type {
  StoreApplyOptions,
  StoreRefundOptions,
  StoreRequest,
} from '../../src/stores/store.js';

/** A MemoryStore that counts its calls and the units given back to it. */
class Counted extends MemoryStore {
  calls = 0;
  refunded = 0;
  override apply(batch: readonly StoreRequest[], o: StoreApplyOptions) {
    this.calls++;
    return super.apply(batch, o);
  }
  override async refund(batch: readonly StoreRequest[], o: StoreRefundOptions) {
    const results = await super.refund(batch, o);
    for (const r of batch) this.refunded += r.cost;
    return results;
  }
}

function config(yaml: string) {
  const { config, issues } = buildEnvoyConfig([parseEnvoyConfigYaml(yaml, 'rules.yaml')], {
    mergeDomainConfig: false,
  });
  expect(issues).toEqual([]);
  return config;
}

const ask = (ip: string) => ({
  domain: 'edge',
  descriptors: [{ entries: [{ key: 'ip', value: ip }] }],
  hitsAddend: 1,
});

/** The service over `main`, with `perSecond` as REDIS_PERSECOND's store when given. */
function service(yaml: string, main: Counted, perSecond: Counted | undefined) {
  return new RateLimitService({
    store: main,
    envoyConfig: config(yaml),
    clock: new ManualClock(0),
    localCacheSizeBytes: 4_096,
    ...(perSecond === undefined ? {} : { perSecondStore: perSecond }),
  });
}

describe('the per-second limiter', () => {
  it('uses the over-limit cache: 2 store calls for 5 requests, as the main store makes', async () => {
    const yaml = `domain: edge
descriptors:
  - key: ip
    rate_limit: { unit: second, requests_per_unit: 1 }
`;
    const calls = async (withPerSecond: boolean): Promise<number> => {
      const main = new Counted();
      const perSecond = withPerSecond ? new Counted() : undefined;
      const svc = service(yaml, main, perSecond);
      const codes: string[] = [];
      for (let i = 0; i < 5; i++)
        codes.push((await svc.shouldRateLimit(ask('10.0.0.1'))).overallCode);
      // The clock stands still: 1 admitted, then 4 over the limit.
      expect(codes).toEqual(['OK', 'OVER_LIMIT', 'OVER_LIMIT', 'OVER_LIMIT', 'OVER_LIMIT']);
      await svc.close();
      if (perSecond !== undefined) expect(main.calls).toBe(0);
      return (perSecond ?? main).calls;
    };
    // One call admits, one denies; the cache answers the other 3.
    expect(await calls(false)).toBe(2);
    expect(await calls(true)).toBe(2);
  });

  it('gives its unspent batch units back to the per-second store on close', async () => {
    const yaml = `domain: edge
descriptors:
  - key: ip
    rate_limit: { unit: second, requests_per_unit: 100 }
    sluice:
      algorithm: token-bucket
      batch: { size: 8, ttl: 1s }
`;
    const returned = async (withPerSecond: boolean): Promise<number> => {
      const main = new Counted();
      const perSecond = withPerSecond ? new Counted() : undefined;
      const svc = service(yaml, main, perSecond);
      // Slow start: the first check reserves 1 and spends it; the second reserves 2 and
      // spends 1, leaving 1 unspent.
      for (let i = 0; i < 2; i++) {
        expect((await svc.shouldRateLimit(ask('10.0.0.2'))).overallCode).toBe('OK');
      }
      await svc.close();
      if (perSecond !== undefined) expect(main.refunded).toBe(0);
      return (perSecond ?? main).refunded;
    };
    expect(await returned(false)).toBe(1);
    expect(await returned(true)).toBe(1);
  });
});
