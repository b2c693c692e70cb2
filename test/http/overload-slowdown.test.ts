/**
 * A real service behind sluice/http (Express, real HTTP on 127.0.0.1) whose downstream
 * slows 10x partway through, run twice: without the admission boundary and with it.
 *
 * Time is virtual: the boundary, the service's own work, the downstream and the load
 * all run on one ManualClock and ManualTimer. The driver moves the clock from one event
 * (a request due, a timer due) to the next, and only once every request sent is settled: answered at the client, or parked on the
 * virtual timer (own work, the downstream, the boundary's queue) with every admitted
 * permit held by a parked request. HTTP therefore takes no virtual time, and a busy
 * machine (a stall, a slow scheduler) changes how long the test takes, never what it
 * measures: the verdict is the same on a quiet machine and with both cores busy.
 *
 * The model:
 * - downstream: one worker, FIFO; each call holds the worker 1 ms, then 10 ms once
 *   slowed: its capacity falls from 1000/s to 100/s;
 * - service: per request 50 ms of its own (templating, other backends) and one
 *   downstream call, behind a rate limit it stays under (10,000/s) and, in the second
 *   run, the admission boundary;
 * - load: open loop at 140 requests/s (sent on schedule whatever the answers), 30 %
 *   CRITICAL and 70 % SHEDDABLE; healthy for 4.5 s, then slowed for 4 s: 1.4x what the
 *   slowed downstream can serve.
 *
 * Without the boundary the downstream queue grows by about 40 requests per second and
 * latency climbs with it for as long as the slowdown lasts. With it, the concurrency
 * limit keeps the downstream queue short, sheddable traffic is refused first (503,
 * Retry-After, reason), and admitted latency stays near the healthy latency. The
 * boundary: a gradient limit with tolerance 1.5 (above the 1.2x that the slower call
 * adds to an unqueued request, so the slowdown alone does not shed), half steps per
 * window (smoothing 0.5), a floor of 8, SHEDDABLE limited to 40 % of the limit, and a
 * LIFO queue of 10 ms.
 */
import { createServer, request, Agent, type Server } from 'node:http';
import express from 'express';
import { afterEach, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/core/clock.js';
import { createLimiter } from '../../src/local/create-limiter.js';
import { MemoryStore } from '../../src/stores/memory/memory-store.js';
import { createHttpRateLimit } from '../../src/http.js';
import {
  createAdmissionBoundary,
  ManualTimer,
  parseCriticality,
  type AdmissionBoundary,
  type Criticality,
  type Timer,
} from '../../src/overload.js';
import { listen, type Listening } from '../support/listen.js';

const RATE_PER_S = 140;
const HEALTHY_MS = 4_500;
const SLOW_MS = 4_000;
const OWN_WORK_MS = 50;
const FAST_CALL_MS = 1;
const SLOW_CALL_MS = 10;
/** After the load stops, how long (virtual) unfinished requests are still awaited. */
const GRACE_MS = 1_000;
/** Real time one virtual millisecond may take to settle: only a hung request reaches it. */
const SETTLE_DEADLINE_MS = 10_000;

const running: Listening[] = [];
afterEach(async () => {
  await Promise.all(running.splice(0).map((s) => s.close()));
});

async function serve(server: Server): Promise<string> {
  const s = await listen(server);
  running.push(s);
  return s.url;
}

/** Where requests are parked on the virtual timer. */
interface Parked {
  ownWork: number;
  downstream: number;
}

/** The downstream: one worker, FIFO; each call holds it for `callMs()` virtual ms. */
function downstream(timer: Timer, parked: Parked, callMs: () => number): () => Promise<void> {
  const waiting: (() => void)[] = [];
  let busy = false;
  const next = (): void => {
    const job = waiting.shift();
    busy = job !== undefined;
    job?.();
  };
  return () => {
    parked.downstream++;
    return new Promise<void>((resolve) => {
      waiting.push(() =>
        timer.set(() => {
          parked.downstream--;
          resolve();
          next();
        }, callMs()),
      );
      if (!busy) next();
    });
  };
}

function get(
  agent: Agent,
  url: string,
  headers: Record<string, string> = {},
): Promise<{ status: number; body: string; retryAfter?: string }> {
  return new Promise((resolve, reject) => {
    const req = request(url, { agent, headers }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (body += c));
      res.on('end', () => {
        const retryAfter = res.headers['retry-after'];
        resolve({
          status: res.statusCode ?? 0,
          body,
          ...(retryAfter === undefined ? {} : { retryAfter }),
        });
      });
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end();
  });
}

interface Sample {
  readonly sentMs: number;
  readonly criticality: Criticality;
  readonly slowPhase: boolean;
  status: number | 'unfinished' | 'error';
  latencyMs: number;
  reason?: string;
  retryAfter?: string;
}

/**
 * A {@link ManualTimer} that knows when its next callback is due, so the driver can move
 * the clock straight to the next event instead of 1 ms at a time (the same instants).
 */
class SteppedTimer implements Timer {
  readonly #inner: ManualTimer;
  readonly #due = new Map<unknown, number>();

  constructor(readonly clock: ManualClock) {
    this.#inner = new ManualTimer(clock);
  }

  set(callback: () => void, delayMs: number): unknown {
    const handle: unknown = this.#inner.set(() => {
      this.#due.delete(handle);
      callback();
    }, delayMs);
    this.#due.set(handle, this.clock.nowMs() + Math.max(0, delayMs));
    return handle;
  }

  clear(handle: unknown): void {
    this.#due.delete(handle);
    this.#inner.clear(handle);
  }

  /** When the next callback is due; Infinity when none is. */
  nextDueMs(): number {
    let next = Infinity;
    for (const atMs of this.#due.values()) next = Math.min(next, atMs);
    return next;
  }

  advance(deltaMs: number): void {
    this.#inner.advance(deltaMs);
  }
}

/** Lets I/O and promise callbacks run (one turn of the event loop). */
const turn = () => new Promise<void>((r) => setImmediate(r));

async function runScenario(
  timer: SteppedTimer,
  boundary: AdmissionBoundary | undefined,
): Promise<Sample[]> {
  const clock = timer.clock;
  let slowed = false;
  const parked: Parked = { ownWork: 0, downstream: 0 };
  const call = downstream(timer, parked, () => (slowed ? SLOW_CALL_MS : FAST_CALL_MS));
  const limiter = createLimiter({
    store: new MemoryStore(),
    clock,
    policies: [{ name: 'tenant', match: ['tenant'], rate: 10_000, burst: 10_000 }],
  });
  const limits = createHttpRateLimit({
    limiter,
    descriptor: () => ({ tenant: 'acme' }),
    // A trusted internal caller sets the criticality (never an internet-facing header).
    criticality: (req) => parseCriticality(req.headers['x-criticality'] as string | undefined),
    ...(boundary === undefined ? {} : { overload: boundary }),
  });
  const app = express();
  app.get('/work', limits.route(), async (_req, res) => {
    parked.ownWork++;
    await new Promise<void>((resolve) =>
      timer.set(() => {
        parked.ownWork--;
        resolve();
      }, OWN_WORK_MS),
    );
    await call();
    res.status(200).json({ ok: true });
  });
  const url = await serve(createServer(app));
  const client = new Agent({ keepAlive: true });

  const samples: Sample[] = [];
  let answered = 0;
  // Settled: no request between two parked states (on the wire, in the rate check, in
  // a handler's synchronous step, or admitted with its permit not yet back).
  const settled = () => {
    const st = boundary?.stats();
    const atTimer = parked.ownWork + parked.downstream;
    return (
      answered + atTimer + (st?.queued ?? 0) === samples.length &&
      (st === undefined || st.inflight === atTimer)
    );
  };
  const settle = async () => {
    const deadline = performance.now() + SETTLE_DEADLINE_MS;
    while (!settled()) {
      if (performance.now() > deadline) {
        throw new Error(
          `not settled at ${clock.nowMs()} ms: ${answered} answered, ${JSON.stringify(parked)}, ${JSON.stringify(boundary?.stats())} of ${samples.length}`,
        );
      }
      await turn();
    }
  };
  // The limit, in flight and queued every 500 ms, printed with the run.
  const trace: string[] = [];
  const total = ((HEALTHY_MS + SLOW_MS) * RATE_PER_S) / 1000;
  const endMs = HEALTHY_MS + SLOW_MS + GRACE_MS;
  const dueMs = (i: number) => Math.ceil((i * 1000) / RATE_PER_S);
  let i = 0;
  let traceMs = 0;
  for (;;) {
    const nowMs = clock.nowMs();
    if (!slowed && nowMs >= HEALTHY_MS) slowed = true;
    for (; i < total && dueMs(i) <= nowMs; i++) {
      const criticality: Criticality = i % 10 < 3 ? 'CRITICAL' : 'SHEDDABLE';
      const sample: Sample = {
        sentMs: nowMs,
        criticality,
        slowPhase: slowed,
        status: 'unfinished',
        latencyMs: 0,
      };
      samples.push(sample);
      void get(client, `${url}/work`, { 'x-criticality': criticality })
        .then((r) => {
          sample.status = r.status;
          sample.latencyMs = clock.nowMs() - sample.sentMs;
          if (r.status === 503) {
            sample.reason = (JSON.parse(r.body) as { reason: string }).reason;
            if (r.retryAfter !== undefined) sample.retryAfter = r.retryAfter;
          }
        })
        .catch(() => {
          sample.status = 'error';
        })
        .finally(() => answered++);
    }
    await settle();
    if (i >= total && answered === samples.length) break;
    for (; boundary !== undefined && traceMs <= nowMs; traceMs += 500) {
      const st = boundary.stats();
      trace.push(`${st.limit}/${st.inflight}/${st.queued}`);
    }
    // The next event: a request due, a timer due, the slowdown, or the end.
    const nextMs = Math.min(
      i < total ? dueMs(i) : Infinity,
      timer.nextDueMs(),
      slowed ? Infinity : HEALTHY_MS,
      endMs,
    );
    if (nextMs >= endMs) break;
    timer.advance(Math.max(1, nextMs - nowMs));
  }
  for (const s of samples) {
    if (s.status === 'unfinished') s.latencyMs = endMs - s.sentMs; // a lower bound
  }
  client.destroy();
  if (trace.length > 0) console.log(`  limit/in flight/queued every 500 ms: ${trace.join(' ')}`);
  return samples;
}

function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] as number;
}

interface Summary {
  readonly healthyP50: number;
  readonly healthyP99: number;
  readonly slowAdmittedP99: number;
  readonly perSecondP50: readonly number[];
  readonly criticalSuccess: number;
  readonly sheddableSuccess: number;
  readonly unfinished: number;
}

function summarize(name: string, samples: readonly Sample[]): Summary {
  const ok = (s: Sample) => s.status === 200;
  const admitted = (s: Sample) => s.status !== 503; // served, failed or still waiting
  const healthy = samples.filter((s) => !s.slowPhase && s.sentMs >= 500 && ok(s));
  const slow = samples.filter((s) => s.slowPhase);
  const rate = (c: Criticality) => {
    const of = slow.filter((s) => s.criticality === c);
    return of.filter(ok).length / of.length;
  };
  const perSecondP50: number[] = [];
  const seconds = Math.ceil((HEALTHY_MS + SLOW_MS) / 1000);
  for (let sec = 0; sec < seconds; sec++) {
    const inSec = samples.filter(
      (s) => admitted(s) && s.sentMs >= sec * 1000 && s.sentMs < (sec + 1) * 1000,
    );
    perSecondP50.push(
      Math.round(
        percentile(
          inSec.map((s) => s.latencyMs),
          50,
        ),
      ),
    );
  }
  const healthyRefused = samples.filter((s) => !s.slowPhase && s.status === 503).length;
  const reasons: Record<string, number> = {};
  for (const s of slow)
    if (s.reason !== undefined)
      reasons[`${s.criticality} ${s.reason}`] = (reasons[`${s.criticality} ${s.reason}`] ?? 0) + 1;
  const summary: Summary = {
    healthyP50: percentile(
      healthy.map((s) => s.latencyMs),
      50,
    ),
    healthyP99: percentile(
      healthy.map((s) => s.latencyMs),
      99,
    ),
    slowAdmittedP99: percentile(
      slow.filter(admitted).map((s) => s.latencyMs),
      99,
    ),
    perSecondP50,
    criticalSuccess: rate('CRITICAL'),
    sheddableSuccess: rate('SHEDDABLE'),
    unfinished: samples.filter((s) => s.status === 'unfinished').length,
  };
  console.log(
    [
      `${name}: ${samples.length} requests at ${RATE_PER_S}/s; downstream ${FAST_CALL_MS} ms -> ${SLOW_CALL_MS} ms per call at ${HEALTHY_MS} ms`,
      `  healthy p50 ${summary.healthyP50.toFixed(1)} ms, p99 ${summary.healthyP99.toFixed(1)} ms (served, after 500 ms warm-up); slowed-phase admitted p99 ${summary.slowAdmittedP99.toFixed(1)} ms (${(summary.slowAdmittedP99 / summary.healthyP99).toFixed(2)}x)`,
      `  median latency of admitted requests by second sent: ${summary.perSecondP50.join(', ')} ms`,
      `  slowed phase success: CRITICAL ${(summary.criticalSuccess * 100).toFixed(1)} %, SHEDDABLE ${(summary.sheddableSuccess * 100).toFixed(1)} %; unfinished at the end ${summary.unfinished}`,
      `  refusals: healthy phase ${healthyRefused}; slowed phase ${JSON.stringify(reasons)}`,
    ].join('\n'),
  );
  return summary;
}

describe('a downstream that slows 10x under a steady load (virtual time)', () => {
  it('without the boundary latency climbs for as long as it lasts; with it admitted p99 stays within 2x of healthy and CRITICAL keeps >= 95 % while SHEDDABLE is shed first', async () => {
    const without = summarize(
      'without the boundary',
      await runScenario(new SteppedTimer(new ManualClock(0)), undefined),
    );
    const timer = new SteppedTimer(new ManualClock(0));
    const boundary = createAdmissionBoundary({
      clock: timer.clock,
      timer,
      limit: {
        algorithm: 'gradient',
        initial: 20,
        min: 8,
        max: 200,
        tolerance: 1.5,
        smoothing: 0.5,
      },
      shares: { SHEDDABLE: 0.4 },
      queue: { size: 50, maxWait: '10ms', order: 'lifo' },
    });
    const samples = await runScenario(timer, boundary);
    const withBoundary = summarize('with the boundary', samples);

    // Without: each slowed second is slower than the one before, and far beyond the
    // healthy latency. (The last second is left out: requests still unfinished when the
    // run stops count only their age so far.)
    const slowSeconds = without.perSecondP50.slice(Math.ceil(HEALTHY_MS / 1000), -1);
    for (let i = 1; i < slowSeconds.length; i++) {
      expect(slowSeconds[i]).toBeGreaterThan(slowSeconds[i - 1] as number);
    }
    expect(slowSeconds.at(-1)).toBeGreaterThan(10 * without.healthyP50);
    expect(without.slowAdmittedP99).toBeGreaterThan(2 * without.healthyP99);

    // With: admitted latency bounded, critical traffic served, sheddable shed first.
    expect(withBoundary.slowAdmittedP99).toBeLessThanOrEqual(2 * withBoundary.healthyP99);
    expect(withBoundary.criticalSuccess).toBeGreaterThanOrEqual(0.95);
    expect(withBoundary.sheddableSuccess).toBeLessThan(withBoundary.criticalSuccess);
    expect(withBoundary.unfinished).toBe(0);
    expect(samples.filter((s) => s.status === 'error')).toEqual([]);
    const refused = samples.filter((s) => s.status === 503);
    expect(refused.length).toBeGreaterThan(0);
    for (const s of refused) {
      expect(['shed', 'queue-full', 'queue-timeout', 'deadline']).toContain(s.reason);
      expect(Number(s.retryAfter)).toBeGreaterThanOrEqual(1);
    }
  }, 120_000);
});
