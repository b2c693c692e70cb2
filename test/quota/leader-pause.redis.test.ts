import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defaultElectionTtlMs, leaseFailureBounds } from '../../src/quota/bounds.js';
import { freePort } from '../support/free-port.js';
import { RedisServer } from '../support/redis-server.js';
import {
  agentProcess,
  controllerProcess,
  type JsonLine,
  type JsonProcess,
} from './fixtures/json-process.js';

// A leader paused with SIGSTOP (a long GC, a frozen VM) for twice its election TTL, then
// resumed: real `sluice controller` processes (dist/, built first), quota agents in their
// own processes on RLQS, a real redis-server. Every process is stopped by its PID.
const R = 1_000;
const L = 3_000;
const E = defaultElectionTtlMs(L);
const RECONNECT_MS = 100; // the agent fixture's
// Bounds on waits for events (tsx agents start slowly beside two spinning processes),
// not on their speed: how fast things happen is asserted from the processes' own clocks.
const START_MS = 120_000;
const EVENT_MS = 60_000;
let redis: RedisServer;
const started: JsonProcess[] = [];
beforeAll(async () => {
  redis = await RedisServer.start();
});
afterAll(async () => {
  for (const p of started) {
    p.kill('SIGCONT');
    p.kill('SIGKILL');
  }
  await Promise.all(started.map((p) => p.ended()));
  await redis.stop();
});

function controller(id: string, port: number, budget: number): JsonProcess {
  const p = controllerProcess(id, [
    ...['--redis', redis.url, '--domain', 'test', '--budget', `name=api@${budget}`],
    ...['--port', String(port), '--refresh-ms', String(R), '--lease-ttl-ms', String(L)],
    ...['--prefix', 'pause'],
  ]);
  started.push(p);
  return p;
}
const isWindow = (l: JsonLine) => l['event'] === 'window';
const isLeaseWindow = (l: JsonLine) => isWindow(l) && l['mode'] === 'lease';
const nthWindowOnLease = (n: number) => (l: JsonLine, i: number, lines: readonly JsonLine[]) =>
  isLeaseWindow(l) && lines.slice(0, i + 1).filter(isLeaseWindow).length >= n;
const applied = (token: unknown) => (l: JsonLine) =>
  l['event'] === 'lease' && l['outcome'] === 'applied' && l['token'] === token;

/** Σ admitted per window start, over windows every one of `all` reported (others added). */
function fleetWindows(
  all: readonly JsonProcess[],
  extra: readonly JsonProcess[],
  from: number,
): { startMs: number; sum: number }[] {
  const sums = new Map<number, { sum: number; n: number }>();
  for (const a of [...all, ...extra]) {
    for (const l of a.lines) {
      const start = l['startMs'] as number;
      if (!isWindow(l) || start < from) continue;
      const s = sums.get(start) ?? { sum: 0, n: 0 };
      s.sum += l['admitted'] as number;
      if (all.includes(a)) s.n += 1;
      sums.set(start, s);
    }
  }
  return [...sums]
    .filter(([, s]) => s.n === all.length)
    .map(([startMs, s]) => ({ startMs, sum: s.sum }))
    .sort((a, b) => a.startMs - b.startMs);
}

describe('a quota leader paused with SIGSTOP', () => {
  it('for twice its election TTL: the woken ex-leader hands out nothing under the term it lost, no window goes over budget, and the fleet is back on leases within 10 s', async () => {
    const budget = 400;
    const fallback = 20;
    const [p1, p2] = [await freePort(), await freePort()];
    const c1 = controller('c1', p1, budget);
    const lost = (await c1.waitFor((l) => l['event'] === 'leader', START_MS))['token'];
    const c2 = controller('c2', p2, budget);
    await c2.waitFor((l) => l['event'] === 'listening', START_MS);
    const targets = [`127.0.0.1:${p1}`, `127.0.0.1:${p2}`];
    const agents = ['a1', 'a2', 'a3', 'a4'].map((n) => {
      const a = agentProcess(n, targets, 200, fallback);
      started.push(a);
      return a;
    });
    // A fifth agent that connects while the leader is paused: its stream waits in the
    // paused leader's socket, and is the first thing the leader meets when it wakes.
    const late = agentProcess('a5', targets, 200, fallback, {}, 'on-signal');
    started.push(late);
    await late.waitFor((l) => l['event'] === 'ready', START_MS);
    await Promise.all(agents.map((a) => a.waitFor(nthWindowOnLease(3), START_MS)));
    const firstWindow = Math.min(
      ...agents.map((a) => a.lines.find(isWindow)!['startMs'] as number),
    );

    const pausedAt = Date.now();
    c1.kill('SIGSTOP');
    late.kill('SIGUSR2');
    const leader = await c2.waitFor((l) => l['event'] === 'leader', EVENT_MS);
    // The pause lasts 2E from its start: this is the scenario's length, not a wait for a state.
    await new Promise((r) => setTimeout(r, Math.max(0, pausedAt + 2 * E - Date.now())));
    const resumedAt = Date.now();
    c1.kill('SIGCONT');
    const c1Mark = c1.lines.length;
    await c1.waitFor((l) => l['event'] === 'step_down', EVENT_MS, c1Mark);
    const fleet = [...agents, late];
    const backAt = await Promise.all(
      fleet.map(async (a) => (await a.waitFor(applied(leader['token']), EVENT_MS))['atMs']),
    );
    // Three whole windows on leases after the wake, whenever the fleet got back (now
    // before it, as the agents leave a silent stream).
    const afterWake = Math.ceil(resumedAt / R) * R + 2 * R;
    await Promise.all(
      fleet.map((a) =>
        a.waitFor((l) => isLeaseWindow(l) && (l['startMs'] as number) >= afterWake, EVENT_MS),
      ),
    );

    expect(leader['token'] as number).toBeGreaterThan(lost as number);
    // Fencing: after waking, the ex-leader sent no round and no agent applied a lease under
    // the term it lost; every agent's tokens only grew.
    const c1Rounds = c1.lines.filter((l) => l['event'] === 'round');
    expect(c1Rounds.filter((r) => (r['atMs'] as number) >= pausedAt)).toEqual([]);
    for (const a of fleet) {
      const leases = a.lines.filter((l) => l['event'] === 'lease' && l['outcome'] === 'applied');
      expect(
        leases.filter((l) => l['token'] === lost && (l['atMs'] as number) >= resumedAt),
      ).toEqual([]);
      const tokens = leases.map((l) => l['token'] as number);
      expect(tokens).toEqual([...tokens].sort((x, y) => x - y));
    }
    // No window over the budget, while it was paused and after it woke.
    const windows = fleetWindows(agents, [late], firstWindow);
    expect(windows.filter((w) => w.startMs + R > pausedAt).length).toBeGreaterThanOrEqual(5);
    const max = Math.max(...windows.map((w) => w.sum));
    // Back on leases (of the new term) within 10 s of the pause's start.
    const backMs = Math.max(...backAt.map((t) => (t as number) - pausedAt));
    expect(backMs).toBeLessThan(10_000);

    const bound = leaseFailureBounds({
      budgetPerSecond: budget,
      refreshMs: R,
      leaseTtlMs: L,
      electionTtlMs: E,
      reconnectMs: RECONNECT_MS,
      controllers: 2,
      pauseMs: resumedAt - pausedAt,
      fleetFallbackPerSecond: fleet.length * fallback,
      agentFallbackPerSecond: fallback,
    }).leaderPaused;
    const onFallback = windows.filter(
      (w) =>
        w.startMs + R > pausedAt &&
        agents.some((a) =>
          a.lines.some(
            (l) => isWindow(l) && l['startMs'] === w.startMs && l['mode'] === 'fallback',
          ),
        ),
    ).length;
    console.log(
      `leader paused ${resumedAt - pausedAt} ms (E ${E}): takeover ${Math.round((leader['atMs'] as number) - pausedAt)} ms; tokens ${String(lost)} → ${String(leader['token'])}; back on leases ${backAt.map((t) => Math.round((t as number) - pausedAt)).join(' ')} ms after the pause began (bound ${bound.backOnLeasesMs}); windows ending on the fallback ${onFallback} (bound: fallback ${bound.fallbackMs} ms); fleet per window: ${windows.map((w) => w.sum).join(' ')}; max ${max} (budget ${budget}, bound ${budget * bound.peakRatio})`,
    );
    // Per agent, each window from the pause's start: admitted/mode/token's last digits.
    for (const a of fleet) {
      const per = a.lines
        .filter((l) => isWindow(l) && (l['startMs'] as number) + R > pausedAt)
        .map((l) => `${l['admitted'] as number}${l['mode'] === 'lease' ? 'L' : 'F'}`);
      console.log(`${a.name}: ${per.join(' ')}`);
    }
    // An agent whose stream went silent moved to the successor before its lease ran out:
    // the bound has no fallback, and no window went over the budget.
    expect(bound.fallbackMs).toBe(0);
    expect(max).toBeLessThanOrEqual(budget * bound.peakRatio);
    expect(max).toBeLessThanOrEqual(budget);
  }, 600_000);
});
