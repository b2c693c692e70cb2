/**
 * The boundary's wiring on a manual clock and timer: the settings reach the limit
 * algorithm and the breaker, release outcomes reach the breaker and the recorder, and
 * refusals carry their reason, code, message and retry-after.
 * test/overload/admission-boundary.test.ts has the main story.
 */
import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/core/clock.js';
import {
  ADMISSION_OUTCOMES,
  ManualTimer,
  OverloadError,
  createAdmissionBoundary,
  type Admission,
  type AdmissionBoundaryOptions,
  type LimitAlgorithm,
  type LimitSample,
  type PermitOutcome,
} from '../../src/overload.js';

const ALL_ONE = { CRITICAL: 1, SHEDDABLE_PLUS: 1, SHEDDABLE: 1 };

function setup(options: AdmissionBoundaryOptions = {}) {
  const clock = new ManualClock(0);
  const timer = new ManualTimer(clock);
  const completions: string[] = [];
  const boundary = createAdmissionBoundary({
    clock,
    timer,
    limit: { algorithm: 'fixed', limit: 2 },
    shares: ALL_ONE,
    queue: { size: 2, maxWait: 100, order: 'fifo' },
    recorder: {
      admission: () => undefined,
      completion: (o, c, held) => completions.push(`${o} ${c} ${held}`),
    },
    ...options,
  });
  return { clock, timer, boundary, completions };
}

function admitted(a: Admission) {
  if (!a.admitted) throw new Error(`refused: ${a.reason}`);
  return a.permit;
}

/** Admits, holds for `ms`, releases with `outcome`. */
async function hold(
  s: ReturnType<typeof setup>,
  ms: number,
  outcome: PermitOutcome,
): Promise<void> {
  const p = admitted(await s.boundary.admit());
  s.clock.advance(ms);
  p.release(outcome);
}

describe('AdmissionBoundary wiring', () => {
  it("builds the limit from the settings: aimd's initial and timeout, gradient's initial, or the algorithm given", async () => {
    const aimd = setup({ limit: { algorithm: 'aimd', initial: 7, timeout: 50 } });
    expect(aimd.boundary.stats().limit).toBe(7);
    await hold(aimd, 51, 'success'); // slower than the timeout: 7 × 0.9
    expect(aimd.boundary.stats().limit).toBe(6);
    const gradient = setup({ limit: { algorithm: 'gradient', initial: 7 } });
    expect(gradient.boundary.stats().limit).toBe(7);
    const samples: LimitSample[] = [];
    const own: LimitAlgorithm = { limit: 3, onSample: (x) => samples.push(x) };
    const custom = setup({ algorithm: own });
    expect(custom.boundary.stats().limit).toBe(3);
    await hold(custom, 4, 'failure');
    expect(samples).toMatchObject([{ rttMs: 4, dropped: false }]);
  });

  it("passes the breaker's rules on: errorRatio, slowCallRatio with slowCall, errorCount", async () => {
    const ratio = setup({ breaker: { minimumCalls: 4, errorRatio: 1 } });
    for (const o of ['failure', 'failure', 'failure', 'success'] as const) await hold(ratio, 1, o);
    expect(ratio.boundary.stats().breaker).toBe('closed'); // 3/4 < 1 (0.5 would have opened it)
    const slow = setup({ breaker: { minimumCalls: 2, slowCallRatio: 0.5, slowCall: 100 } });
    await hold(slow, 100, 'success');
    await hold(slow, 100, 'success');
    expect(slow.boundary.stats().breaker).toBe('open');
    const count = setup({ breaker: { minimumCalls: 1, errorCount: 2 } });
    await hold(count, 1, 'success');
    await hold(count, 1, 'failure');
    expect(count.boundary.stats().breaker).toBe('closed'); // 1 failure < 2
    await hold(count, 1, 'failure');
    expect(count.boundary.stats().breaker).toBe('open');
  });

  it('a dropped request counts as a breaker failure, an ignored one not at all', async () => {
    const s = setup({ breaker: { minimumCalls: 2 } });
    for (let i = 0; i < 5; i++) await hold(s, 1, 'ignore');
    await hold(s, 1, 'dropped');
    expect(s.boundary.stats().breaker).toBe('closed'); // 1 call counted
    await hold(s, 1, 'success');
    expect(s.boundary.stats().breaker).toBe('open'); // 1 failure of 2
  });

  it('an open breaker refuses with its own retry-after; other refusals use retryAfter', async () => {
    const s = setup({
      breaker: { minimumCalls: 1, open: '3s' },
      retryAfter: 250,
      queue: false,
      limit: { algorithm: 'fixed', limit: 1 },
    });
    const p = admitted(await s.boundary.admit());
    expect(await s.boundary.admit()).toMatchObject({ reason: 'shed', retryAfterMs: 250 });
    p.release('failure');
    s.clock.advance(1_000);
    expect(await s.boundary.admit()).toMatchObject({
      reason: 'breaker-open',
      code: 'SLUICE_ERR_OVERLOAD_BREAKER_OPEN',
      retryAfterMs: 2_000,
    });
  });

  it('a half-open breaker with its probes out refuses after the limiter: that slot is freed and feeds no sample', async () => {
    const samples: LimitSample[] = [];
    const s = setup({
      algorithm: { limit: 5, onSample: (x) => samples.push(x) },
      breaker: { minimumCalls: 1, open: '1s', probes: 1, probeLease: '2s' },
    });
    await hold(s, 1, 'failure');
    expect(s.boundary.stats().breaker).toBe('open');
    s.clock.advance(1_000);
    const probe = admitted(await s.boundary.admit());
    s.clock.advance(300);
    expect(await s.boundary.admit()).toMatchObject({
      reason: 'breaker-open',
      retryAfterMs: 1_700, // the probe's lease
    });
    expect(s.boundary.stats()).toMatchObject({ inflight: 1, breaker: 'half-open' });
    expect(samples).toHaveLength(1); // the first request's only
    probe.release('success');
    expect(s.boundary.stats()).toMatchObject({ inflight: 0, breaker: 'closed' });
  });

  it('an open breaker refuses at once, before the limiter: a request that would be shed gets breaker-open', async () => {
    const s = setup({
      shares: {}, // defaults: SHEDDABLE may fill half the limit
      queue: false,
      breaker: { minimumCalls: 1, open: '1s' },
    });
    admitted(await s.boundary.admit()); // held: SHEDDABLE's ceiling (1 of 2) is reached
    await hold(s, 1, 'failure');
    expect(s.boundary.stats().breaker).toBe('open');
    expect(await s.boundary.admit({ criticality: 'SHEDDABLE' })).toMatchObject({
      reason: 'breaker-open',
      retryAfterMs: 1_000,
    });
  });

  it('a half-open breaker with its probe out does not refuse before queueing: a request that waits is admitted once the probe closes it', async () => {
    const s = setup({
      limit: { algorithm: 'fixed', limit: 1 },
      queue: { size: 5, maxWait: 1_000, order: 'fifo' },
      breaker: { minimumCalls: 1, open: '1s', probes: 1 },
    });
    await hold(s, 1, 'failure');
    s.clock.advance(1_000);
    const probe = admitted(await s.boundary.admit());
    expect(s.boundary.stats().breaker).toBe('half-open');
    const waiting = s.boundary.admit();
    expect(s.boundary.stats().queued).toBe(1);
    s.clock.advance(20);
    probe.release('success');
    expect(admitted(await waiting).waitedMs).toBe(20);
    expect(s.boundary.stats().breaker).toBe('closed');
  });

  it('a deadline after the estimated turn (waiters ahead + 1) × mean hold ÷ ceiling waits, and gets a slot freed before it', async () => {
    const s = setup({ limit: { algorithm: 'fixed', limit: 2 } });
    await hold(s, 50, 'success'); // mean hold 50 ms
    const a = admitted(await s.boundary.admit());
    admitted(await s.boundary.admit());
    // (0 + 1) × 50 / 2 = 25 ms < 30 ms: it waits.
    const w = s.boundary.admit({ deadlineMs: s.clock.nowMs() + 30 });
    expect(s.boundary.stats().queued).toBe(1);
    s.timer.advance(10);
    a.release('success');
    expect(admitted(await w).waitedMs).toBe(10);
  });

  it('waits and hold times are measured from when the request came, on a clock that does not start at 0', async () => {
    const waits: string[] = [];
    const s = setup({ recorder: { admission: (o, _c, ms) => waits.push(`${o} ${ms}`) } });
    s.clock.set(10_000);
    const completions: number[] = [];
    const t = setup({
      recorder: { admission: () => undefined, completion: (_o, _c, ms) => completions.push(ms) },
    });
    t.clock.set(10_000);
    admitted(await s.boundary.admit());
    admitted(await s.boundary.admit());
    const w = s.boundary.admit();
    s.timer.advance(100);
    expect(await w).toMatchObject({ reason: 'queue-timeout' });
    expect(waits).toEqual(['admitted 0', 'admitted 0', 'queue-timeout 100']);
    const p = admitted(await t.boundary.admit());
    t.clock.advance(30);
    p.release('success');
    expect(completions).toEqual([30]);
  });

  it('release reports to the recorder once, with the outcome, the criticality and the time held', async () => {
    const s = setup();
    const p = admitted(await s.boundary.admit({ criticality: 'SHEDDABLE' }));
    s.clock.advance(30);
    p.release('dropped');
    p.release('success');
    expect(s.completions).toEqual(['dropped SHEDDABLE 30']);
  });

  it('a recorder that throws changes no answer', async () => {
    const s = setup({
      recorder: {
        admission: () => {
          throw new Error('recorder down');
        },
        completion: () => {
          throw new Error('recorder down');
        },
      },
    });
    const p = admitted(await s.boundary.admit());
    p.release('success');
    admitted(await s.boundary.admit());
    expect(s.boundary.stats()).toMatchObject({ inflight: 1, outcomes: { admitted: 2 } });
  });

  it('stats count every outcome, and the requests waiting', async () => {
    const s = setup({ queue: { size: 1, maxWait: 100, order: 'fifo' } });
    expect(Object.keys(s.boundary.stats().outcomes)).toEqual([...ADMISSION_OUTCOMES]);
    expect(ADMISSION_OUTCOMES).toEqual([
      'admitted',
      'shed',
      'queue-full',
      'queue-timeout',
      'deadline',
      'breaker-open',
    ]);
    admitted(await s.boundary.admit());
    admitted(await s.boundary.admit());
    const waiting = s.boundary.admit();
    expect(s.boundary.stats().queued).toBe(1);
    await s.boundary.admit(); // queue-full
    await s.boundary.admit({ deadlineMs: 0 }); // deadline
    s.timer.advance(100);
    await waiting; // queue-timeout
    expect(s.boundary.stats()).toMatchObject({
      queued: 0,
      breaker: 'none',
      outcomes: {
        admitted: 2,
        shed: 0,
        'queue-full': 1,
        'queue-timeout': 1,
        deadline: 1,
        'breaker-open': 0,
      },
    });
  });
});

describe('AdmissionBoundary.run', () => {
  it('rejects a refusal with an OverloadError naming the reason, and never runs fn', async () => {
    const s = setup({
      limit: { algorithm: 'fixed', limit: 1 },
      queue: { size: 1, maxWait: 100, order: 'fifo' },
      retryAfter: 300,
    });
    let ran = 0;
    const fn = () => {
      ran++;
      return Promise.resolve();
    };
    const refusal = (p: Promise<unknown>) =>
      p.then(
        () => undefined,
        (e: unknown) => e,
      );
    admitted(await s.boundary.admit());
    const timedOut = refusal(s.boundary.run(fn));
    const full = await refusal(s.boundary.run(fn));
    const deadline = await refusal(s.boundary.run(fn, { deadlineMs: 0 }));
    s.timer.advance(100);
    const errors = [full, deadline, await timedOut];
    for (const e of errors) {
      expect(e).toBeInstanceOf(OverloadError);
      expect(e).toMatchObject({ name: 'OverloadError', retryAfterMs: 300 });
    }
    expect(errors.map((e) => [(e as OverloadError).code, (e as OverloadError).message])).toEqual([
      ['SLUICE_ERR_OVERLOAD_QUEUE_FULL', 'overloaded: the queue is full'],
      ['SLUICE_ERR_OVERLOAD_DEADLINE', 'overloaded: the deadline cannot be met'],
      ['SLUICE_ERR_OVERLOAD_QUEUE_TIMEOUT', 'overloaded: waited the longest queue wait'],
    ]);
    const shed = setup({ limit: { algorithm: 'fixed', limit: 1 }, queue: false });
    admitted(await shed.boundary.admit());
    expect(await refusal(shed.boundary.run(fn))).toMatchObject({
      code: 'SLUICE_ERR_OVERLOAD_SHED',
      message: 'overloaded: shed: no capacity for this criticality',
    });
    const open = setup({ breaker: { minimumCalls: 1 } });
    await hold(open, 1, 'failure');
    expect(await refusal(open.boundary.run(fn))).toMatchObject({
      code: 'SLUICE_ERR_OVERLOAD_BREAKER_OPEN',
      message: 'overloaded: the circuit breaker is open',
    });
    expect(ran).toBe(0);
  });

  it("releases fn's result as success, an OverloadError thrown as dropped, another throw as failure or as classify says", async () => {
    const s = setup();
    expect(await s.boundary.run(() => Promise.resolve(7))).toBe(7);
    const dependency = new OverloadError('SLUICE_ERR_OVERLOAD_SHED', 'upstream shed', 0);
    await expect(s.boundary.run(() => Promise.reject(dependency))).rejects.toBe(dependency);
    await expect(s.boundary.run(() => Promise.reject(new Error('bug')))).rejects.toThrow('bug');
    await expect(
      s.boundary.run(() => Promise.reject(new Error('gone')), { classify: () => 'ignore' }),
    ).rejects.toThrow('gone');
    expect(s.completions).toEqual([
      'success CRITICAL 0',
      'dropped CRITICAL 0',
      'failure CRITICAL 0',
      'ignore CRITICAL 0',
    ]);
    expect(s.boundary.stats().inflight).toBe(0);
  });
});
