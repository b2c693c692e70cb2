/** OverloadMetrics: one counter per outcome, gauges per boundary, two boundaries in one registry. */
import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/core/clock.js';
import { ManualTimer, OverloadMetrics, createAdmissionBoundary } from '../../src/overload.js';

describe('OverloadMetrics', () => {
  it("counts every admission outcome and completion, and reads each boundary's gauges at scrape time", async () => {
    const registry = new Registry();
    const clock = new ManualClock(0);
    const timer = new ManualTimer(clock);
    const apiMetrics = new OverloadMetrics(registry, 'api');
    const batchMetrics = new OverloadMetrics(registry, 'batch');
    const api = createAdmissionBoundary({
      clock,
      timer,
      limit: { algorithm: 'fixed', limit: 1 },
      queue: { size: 1, maxWait: 50 },
      recorder: apiMetrics,
    });
    const batch = createAdmissionBoundary({
      clock,
      limit: { algorithm: 'fixed', limit: 3 },
      queue: false,
      recorder: batchMetrics,
    });
    apiMetrics.observe(api);
    batchMetrics.observe(batch);

    const a = await api.admit();
    const waiting = api.admit();
    expect(await api.admit({ criticality: 'SHEDDABLE' })).toMatchObject({ reason: 'queue-full' });
    clock.advance(20);
    if (a.admitted) a.permit.release('dropped');
    const b = await waiting;
    const held = await batch.admit({ criticality: 'SHEDDABLE' });
    expect([b.admitted, held.admitted]).toEqual([true, true]);

    const text = await registry.metrics();
    const lines = text
      .split('\n')
      .filter((l) => l.startsWith('sluice_overload_') && !l.includes('_bucket'));
    expect(lines).toEqual([
      'sluice_overload_admissions_total{boundary="api",outcome="admitted",criticality="CRITICAL"} 2',
      'sluice_overload_admissions_total{boundary="api",outcome="queue-full",criticality="SHEDDABLE"} 1',
      'sluice_overload_admissions_total{boundary="batch",outcome="admitted",criticality="SHEDDABLE"} 1',
      'sluice_overload_completions_total{boundary="api",outcome="dropped",criticality="CRITICAL"} 1',
      'sluice_overload_queue_wait_seconds_sum{boundary="api"} 0.02',
      'sluice_overload_queue_wait_seconds_count{boundary="api"} 2',
      'sluice_overload_queue_wait_seconds_sum{boundary="batch"} 0',
      'sluice_overload_queue_wait_seconds_count{boundary="batch"} 1',
      'sluice_overload_limit{boundary="api"} 1',
      'sluice_overload_limit{boundary="batch"} 3',
      'sluice_overload_inflight{boundary="api"} 1',
      'sluice_overload_inflight{boundary="batch"} 1',
      'sluice_overload_queued{boundary="api"} 0',
      'sluice_overload_queued{boundary="batch"} 0',
      'sluice_overload_breaker_state{boundary="api"} -1',
      'sluice_overload_breaker_state{boundary="batch"} -1',
    ]);
  });
});
