/**
 * One limiter instance of the accuracy test (local-and-batching.redis.test.ts), run as
 * its own process: `createLimiter` over a RedisStore on the test's redis-server (client
 * clock, so each decision is made at the instant the instance stamped it) with the stages
 * of one setup.
 * Commands come as JSON lines on stdin; answers go as JSON lines on stdout.
 */
import { createInterface } from 'node:readline';
import type { PolicyInput } from '../../../src/config/policies.js';
import { type Limiter } from '../../../src/limiter/limiter.js';
import { createLimiter } from '../../../src/local/create-limiter.js';
import type { Stage } from '../../../src/limiter/stage.js';
import { LocalStage } from '../../../src/local/local-stage.js';
import { OverLimitCache } from '../../../src/local/over-limit-cache.js';
import { TokenBatchStage, type TokenBatchStats } from '../../../src/local/token-batch.js';
import { RedisStore } from '../../../src/stores/redis/redis-store.js';
import type { Store } from '../../../src/stores/store.js';
import { mulberry32 } from '../../support/random.js';

export type StageName = 'local' | 'cache' | 'batch';

export interface RunCommand {
  readonly cmd: 'run';
  readonly id: number;
  readonly port: number;
  readonly policy: Record<string, unknown>;
  readonly stages: readonly StageName[];
  readonly startAtMs: number;
  readonly durationMs: number;
  readonly pattern: 'steady' | 'bursty';
  /** Requests per second this instance sends to the hot tenant. */
  readonly hotRps: number;
  /** Requests per second this instance spreads over Zipf tenants. */
  readonly zipfRps: number;
  readonly tenants: number;
  readonly seed: number;
  /** The store is down: do not wait for its connection. */
  readonly storeDown?: boolean;
}

export interface RunReport {
  readonly id: number;
  /** Stamps (ms after startAtMs) of the hot tenant's admitted requests. */
  readonly hotAdmitted: number[];
  /**
   * When each of them was answered (ms after startAtMs), in the same order. The bucket's
   * time for a request lies between its stamp and its answer: it never goes back, and no
   * stamp it has seen is later than the instant it decides (one machine, one clock).
   */
  readonly hotAnswered: number[];
  readonly firstSendMs: number;
  readonly lastSendMs: number;
  readonly hotSent: number;
  readonly paths: Record<string, number>;
  /** Admitted per Zipf tenant. */
  readonly tenantAdmitted: Record<string, number>;
  readonly storeCalls: number;
  readonly decisions: number;
  /** Store calls on the hot tenant's bucket, and its decisions. */
  readonly hotCalls: number;
  /**
   * Units the store admitted on the hot tenant's bucket (checks, or a batch's
   * reservations), less those given back: every admission of the stages comes out of it.
   */
  readonly hotStoreUnits: number;
  readonly hotDecisions: number;
  /**
   * When the first answer to a hot request arrived (ms after startAtMs): the bucket had
   * decided a hot request by then, so its time ran at least from there to the last send.
   */
  readonly firstHotAnsweredMs: number;
  /** The longest round trip of a check (ms): under-use's in-flight term of a local stage. */
  readonly maxRoundTripMs: number;
  /** The batch stage's counters, when it ran. */
  readonly batch?: TokenBatchStats;
}

export interface HoldCommand {
  readonly cmd: 'hold';
  readonly id: number;
  readonly port: number;
  readonly policy: Record<string, unknown>;
  readonly checks: number;
}

export interface HoldReport {
  readonly id: number;
  readonly spent: number;
  readonly reserved: number;
  readonly held: number;
}

export interface CloseCommand {
  readonly cmd: 'close';
  readonly id: number;
}

/** A store that counts the calls made on it (the remote calls a setup costs). */
class CountingStore implements Store {
  calls = 0;
  /** Calls on the hot tenant's bucket. */
  hotCalls = 0;
  /** Units the store itself admitted on the hot tenant's bucket, less those given back. */
  hotStoreUnits = 0;
  constructor(readonly inner: RedisStore) {}
  apply(...args: Parameters<Store['apply']>): ReturnType<Store['apply']> {
    this.calls++;
    const batch = args[0];
    if (batch[0]?.key.startsWith('{hot}') === true) this.hotCalls++;
    return this.inner.apply(...args).then((results) => {
      results.forEach((r, k) => {
        const req = batch[k]!;
        if (r.ok && r.decision.allowed && req.enforce && req.key.startsWith('{hot}'))
          this.hotStoreUnits += req.cost;
      });
      return results;
    });
  }
  refund(
    ...args: Parameters<NonNullable<Store['refund']>>
  ): ReturnType<NonNullable<Store['refund']>> {
    this.calls++;
    const batch = args[0];
    return this.inner.refund(...args).then((results) => {
      results.forEach((r, k) => {
        const req = batch[k]!;
        if (r.ok && req.key.startsWith('{hot}')) this.hotStoreUnits -= req.cost;
      });
      return results;
    });
  }
  close(): Promise<void> {
    return this.inner.close();
  }
}

function storeAt(port: number): CountingStore {
  return new CountingStore(
    RedisStore.connect(`redis://127.0.0.1:${port}`, { clock: 'client', prefix: 'acc' }),
  );
}

function stagesOf(names: readonly StageName[]): Stage[] {
  return names.map((name) =>
    name === 'local'
      ? new LocalStage()
      : name === 'cache'
        ? new OverLimitCache({ maxBytes: 1 << 20 })
        : new TokenBatchStage(),
  );
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function run(c: RunCommand): Promise<RunReport> {
  const store = storeAt(c.port);
  const stages = stagesOf(c.stages);
  const limiter = createLimiter({ store, policies: [c.policy as PolicyInput], stages });
  const batchStage = stages.find((s): s is TokenBatchStage => s instanceof TokenBatchStage);
  const random = mulberry32(c.seed);
  const weights = Array.from({ length: c.tenants }, (_, i) => 1 / (i + 1) ** 1.1);
  const total = weights.reduce((a, b) => a + b, 0);
  const zipfTenant = (): string => {
    let x = random() * total;
    for (let i = 0; i < weights.length; i++) if ((x -= weights[i]!) < 0) return `z${i}`;
    return `z${weights.length - 1}`;
  };
  const hotAdmitted: number[] = [];
  const hotAnswered: number[] = [];
  const paths: Record<string, number> = {};
  const tenantAdmitted: Record<string, number> = {};
  let firstSendMs = Infinity;
  let lastSendMs = -Infinity;
  let hotSent = 0;
  let zipfSent = 0;
  let decisions = 0;
  let firstHotAnsweredMs = Infinity;
  let maxRoundTripMs = 0;
  const inFlight = new Set<Promise<void>>();
  const send = (tenant: string, hot: boolean): void => {
    const nowMs = Date.now();
    if (hot) {
      hotSent++;
      firstSendMs = Math.min(firstSendMs, nowMs - c.startAtMs);
      lastSendMs = Math.max(lastSendMs, nowMs - c.startAtMs);
    }
    const p = limiter.checkAt(nowMs, { tenant }).then((r) => {
      const d = r.decision!;
      decisions++;
      if (hot) firstHotAnsweredMs = Math.min(firstHotAnsweredMs, Date.now() - c.startAtMs);
      maxRoundTripMs = Math.max(maxRoundTripMs, Date.now() - nowMs);
      if (hot) paths[`${d.path}:${d.status}`] = (paths[`${d.path}:${d.status}`] ?? 0) + 1;
      if (!d.allowed) return;
      if (hot) {
        hotAdmitted.push(nowMs - c.startAtMs);
        hotAnswered.push(Date.now() - c.startAtMs);
      } else tenantAdmitted[tenant] = (tenantAdmitted[tenant] ?? 0) + 1;
    });
    inFlight.add(p);
    void p.finally(() => inFlight.delete(p));
  };
  if (c.storeDown !== true) await store.inner.ready();
  await sleep(Math.max(0, c.startAtMs - Date.now()));
  const endAtMs = c.startAtMs + c.durationMs;
  let nextBurstMs = c.startAtMs;
  while (Date.now() < endAtMs) {
    const elapsed = Date.now() - c.startAtMs;
    if (c.pattern === 'steady') {
      const due = Math.floor((elapsed * c.hotRps) / 1_000) - hotSent;
      for (let i = 0; i < due; i++) send('hot', true);
    } else if (Date.now() >= nextBurstMs) {
      for (let i = 0; i < c.hotRps / 10; i++) send('hot', true);
      nextBurstMs += 100;
    }
    const zipfDue = Math.floor((elapsed * c.zipfRps) / 1_000) - zipfSent;
    for (let i = 0; i < zipfDue; i++, zipfSent++) send(zipfTenant(), false);
    await sleep(2);
  }
  await Promise.all(inFlight);
  await limiter.close();
  const report: RunReport = {
    id: c.id,
    hotAdmitted,
    hotAnswered,
    firstSendMs,
    lastSendMs,
    hotSent,
    paths,
    tenantAdmitted,
    storeCalls: store.calls,
    decisions,
    hotCalls: store.hotCalls,
    hotStoreUnits: store.hotStoreUnits,
    hotDecisions: Object.values(paths).reduce((a, b) => a + b, 0),
    firstHotAnsweredMs,
    maxRoundTripMs,
    ...(batchStage === undefined ? {} : { batch: { ...batchStage.stats } }),
  };
  await store.close();
  return report;
}

let holding: { limiter: Limiter; stage: TokenBatchStage; store: CountingStore } | undefined;

async function hold(c: HoldCommand): Promise<HoldReport> {
  const store = storeAt(c.port);
  await store.inner.ready();
  const stage = new TokenBatchStage();
  const limiter = createLimiter({ store, policies: [c.policy as PolicyInput], stages: [stage] });
  holding = { limiter, stage, store };
  let spent = 0;
  for (let i = 0; i < c.checks; i++) {
    if ((await limiter.checkAt(Date.now(), { tenant: 'hold' })).allowed) spent++;
  }
  return { id: c.id, spent, reserved: stage.stats.unitsReserved, held: stage.unitsHeld };
}

async function close(c: CloseCommand): Promise<{ id: number; returned: number }> {
  const h = holding;
  if (h === undefined) return { id: c.id, returned: 0 };
  await h.limiter.close();
  await h.store.close();
  return { id: c.id, returned: h.stage.stats.unitsReturned };
}

const reply = (o: unknown): void => void process.stdout.write(`${JSON.stringify(o)}\n`);

createInterface({ input: process.stdin }).on('line', (line) => {
  const c = JSON.parse(line) as RunCommand | HoldCommand | CloseCommand;
  const done = c.cmd === 'run' ? run(c) : c.cmd === 'hold' ? hold(c) : close(c);
  done.then(reply, (e: unknown) => reply({ id: c.id, error: String(e) }));
});
reply({ ready: process.pid });
