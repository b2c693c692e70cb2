/** OverloadMetrics' defaults: the `default` boundary label and the queue-wait buckets. */
import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/core/clock.js';
import { OverloadMetrics, createAdmissionBoundary } from '../../src/overload.js';

describe('OverloadMetrics defaults', () => {
  it('labels a boundary "default" when given no name, and buckets queue waits from 0 to 2.5 s', async () => {
    const registry = new Registry();
    const metrics = new OverloadMetrics(registry);
    const boundary = createAdmissionBoundary({
      clock: new ManualClock(0),
      limit: { algorithm: 'fixed', limit: 1 },
      queue: false,
      recorder: metrics,
    });
    await boundary.admit();
    const text = await registry.metrics();
    expect(text).toContain(
      'sluice_overload_admissions_total{boundary="default",outcome="admitted",criticality="CRITICAL"} 1',
    );
    const buckets = [
      ...text.matchAll(/sluice_overload_queue_wait_seconds_bucket\{le="([^"]+)"/g),
    ].map((m) => m[1]);
    expect(buckets).toEqual([
      '0',
      '0.001',
      '0.005',
      '0.01',
      '0.025',
      '0.05',
      '0.1',
      '0.25',
      '0.5',
      '1',
      '2.5',
      '+Inf',
    ]);
  });
});
