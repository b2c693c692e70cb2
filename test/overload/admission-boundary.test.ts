/** The composed boundary on a manual clock and timer: queue bounds, deadlines, shedding order, breaker, run(). */
import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/core/clock.js';
import { PolicyError } from '../../src/core/errors.js';
import {
  ManualTimer,
  OverloadError,
  createAdmissionBoundary,
  type Admission,
  type AdmissionBoundaryOptions,
} from '../../src/overload.js';

function setup(options: AdmissionBoundaryOptions = {}) {
  const clock = new ManualClock(0);
  const timer = new ManualTimer(clock);
  const events: string[] = [];
  const boundary = createAdmissionBoundary({
    clock,
    timer,
    limit: { algorithm: 'fixed', limit: 2 },
    shares: { CRITICAL: 1, SHEDDABLE_PLUS: 1, SHEDDABLE: 1 },
    queue: { size: 2, maxWait: 100, order: 'fifo' },
    recorder: { admission: (o, c, w) => events.push(`${o} ${c} ${w}`) },
    ...options,
  });
  return { clock, timer, boundary, events };
}

/** Settles pending promise callbacks. */
const flush = () => new Promise<void>((r) => setImmediate(r));

function admitted(a: Admission) {
  if (!a.admitted) throw new Error(`refused: ${a.reason}`);
  return a.permit;
}

describe('AdmissionBoundary', () => {
  it('a freed slot goes to the waiting request, then the queue bounds count and time', async () => {
    const { boundary, timer, events } = setup();
    const a = admitted(await boundary.admit());
    admitted(await boundary.admit());
    const w1 = boundary.admit();
    const w2 = boundary.admit();
    const full = await boundary.admit(); // queue size 2
    expect(full).toMatchObject({
      admitted: false,
      reason: 'queue-full',
      code: 'SLUICE_ERR_OVERLOAD_QUEUE_FULL',
      retryAfterMs: 1000,
    });
    timer.advance(40);
    a.release('success');
    const first = admitted(await w1);
    expect(first.waitedMs).toBe(40);
    timer.advance(60); // w2 has now waited 100 ms
    expect(await w2).toMatchObject({ admitted: false, reason: 'queue-timeout' });
    expect(timer.pending).toBe(0);
    expect(events).toEqual([
      'admitted CRITICAL 0',
      'admitted CRITICAL 0',
      'queue-full CRITICAL 0',
      'admitted CRITICAL 40',
      'queue-timeout CRITICAL 100',
    ]);
  });

  it('a request whose deadline falls before its estimated turn is refused at once, not after waiting', async () => {
    const { boundary, clock, timer } = setup();
    // Teach the limiter a mean hold of 50 ms.
    const p = admitted(await boundary.admit());
    clock.advance(50);
    p.release('success');
    admitted(await boundary.admit());
    admitted(await boundary.admit());
    // Full; one waiter would wait about (0 + 1) × 50 / 2 = 25 ms. A deadline 20 ms away
    // cannot be met: refused at once, at the same instant, with no timer left behind.
    const r = await boundary.admit({ deadlineMs: clock.nowMs() + 20 });
    expect(r).toMatchObject({
      admitted: false,
      reason: 'deadline',
      code: 'SLUICE_ERR_OVERLOAD_DEADLINE',
    });
    expect(timer.pending).toBe(0);
    // A deadline 30 ms away can be met by the estimate: it waits, and is refused at the
    // deadline (before maxWait) if no slot frees up by then.
    const w = boundary.admit({ deadlineMs: clock.nowMs() + 30 });
    timer.advance(30);
    expect(await w).toMatchObject({ admitted: false, reason: 'deadline' });
  });

  it('sheddable traffic is shed first: ceilings per criticality, and a full queue gives way to more critical requests', async () => {
    const { boundary } = setup({
      limit: { algorithm: 'fixed', limit: 10 },
      shares: {}, // defaults: SHEDDABLE 0.5, SHEDDABLE_PLUS 0.75, CRITICAL 0.9
      queue: false,
    });
    const held = [];
    for (let i = 0; i < 5; i++)
      held.push(admitted(await boundary.admit({ criticality: 'SHEDDABLE' })));
    expect(await boundary.admit({ criticality: 'SHEDDABLE' })).toMatchObject({
      reason: 'shed',
      code: 'SLUICE_ERR_OVERLOAD_SHED',
    });
    for (let i = 0; i < 4; i++)
      held.push(admitted(await boundary.admit({ criticality: 'CRITICAL' })));
    expect(await boundary.admit({ criticality: 'CRITICAL' })).toMatchObject({ reason: 'shed' });
    held.push(admitted(await boundary.admit({ criticality: 'CRITICAL_PLUS' })));
    expect(boundary.stats()).toMatchObject({ inflight: 10, outcomes: { admitted: 10, shed: 2 } });

    const q = setup({ queue: { size: 1, maxWait: 1_000, order: 'lifo' } });
    admitted(await q.boundary.admit());
    admitted(await q.boundary.admit());
    const sheddable = q.boundary.admit({ criticality: 'SHEDDABLE' });
    const critical = q.boundary.admit({ criticality: 'CRITICAL' });
    expect(await sheddable).toMatchObject({ admitted: false, reason: 'shed' });
    expect(await q.boundary.admit({ criticality: 'SHEDDABLE' })).toMatchObject({
      reason: 'queue-full',
    });
    q.timer.advance(1_000);
    expect(await critical).toMatchObject({ reason: 'queue-timeout' });
  });

  it('most critical first when a slot frees; LIFO within a level', async () => {
    const { boundary } = setup({ queue: { size: 10, maxWait: 1_000, order: 'lifo' } });
    const a = admitted(await boundary.admit());
    admitted(await boundary.admit());
    const order: string[] = [];
    const wait = (name: string, criticality: 'SHEDDABLE' | 'CRITICAL') =>
      void boundary.admit({ criticality }).then((r) => {
        if (r.admitted) {
          order.push(name);
          r.permit.release('success');
        }
      });
    wait('s1', 'SHEDDABLE');
    wait('c1', 'CRITICAL');
    wait('c2', 'CRITICAL');
    wait('s2', 'SHEDDABLE');
    a.release('success');
    for (let i = 0; i < 10; i++) await flush();
    expect(order).toEqual(['c2', 'c1', 's2', 's1']);
  });

  it('an open breaker refuses before queueing; its probes go through the boundary; run() throws OverloadError', async () => {
    const { boundary, clock } = setup({
      limit: { algorithm: 'fixed', limit: 5 },
      breaker: { minimumCalls: 4, open: '1s', probes: 1 },
    });
    const boom = () => Promise.reject(new Error('dependency down'));
    for (let i = 0; i < 4; i++) await expect(boundary.run(boom)).rejects.toThrow('dependency down');
    expect(boundary.stats().breaker).toBe('open');
    const refused = await boundary.run(() => Promise.resolve('unreached')).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(OverloadError);
    expect(refused).toMatchObject({
      code: 'SLUICE_ERR_OVERLOAD_BREAKER_OPEN',
      retryAfterMs: 1000,
      status: 'UNAVAILABLE',
    });
    expect(boundary.stats().inflight).toBe(0);
    clock.advance(1_000);
    expect(await boundary.run(() => Promise.resolve('probe ok'))).toBe('probe ok');
    expect(boundary.stats()).toMatchObject({ breaker: 'closed', inflight: 0 });
  });

  it('options are validated with every problem named', () => {
    let error: unknown;
    try {
      createAdmissionBoundary({
        limit: { algorithm: 'gradient', min: 10, max: 5 },
        shares: { SHEDDABLE: 0.95 },
        queue: { size: 0, maxWait: 'soon' },
      } as never);
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(PolicyError);
    expect((error as PolicyError).code).toBe('SLUICE_ERR_OVERLOAD_CONFIG_INVALID');
    expect((error as PolicyError).message).toMatchInlineSnapshot(`
      "invalid overload options (4 issues):
        limit.min: min 10 exceeds max 5
        shares: SHEDDABLE (0.95) must not exceed SHEDDABLE_PLUS (0.75): a lower level would keep capacity from a higher one
        queue.size: must be >= 1
        queue.maxWait: expected a duration of at least 1ms as whole ms (number) or a string like "500ms", "1s", "1m", "1h", "1d"; got "soon""
    `);
  });
});
