/**
 * `sluice serve` as a quota lease agent, with real processes on loopback: one
 * `sluice controller` (its leader key and state in a real redis-server) and two
 * `sluice serve` (dist/, built first), each on its own memory store, so nothing but the
 * controller's leases holds the two to one budget. The test sends envoy RLS v3
 * ShouldRateLimit calls over gRPC to both, counts what each admitted per lease window,
 * and compares the fleet with the bound `sluice explain` prints for the same settings.
 * Every process is stopped by its PID.
 */
import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { freePort } from '../support/free-port.js';
import { RedisServer } from '../support/redis-server.js';
import { spawnServe, stopServe, type Serve } from '../support/sluice-serve.js';
import { sumOf } from '../support/prometheus-text.js';
import { waitFor } from '../support/wait.js';
import { call, connect, type Clients } from '../service/grpc/client.js';
import { controllerProcess, root, type JsonProcess } from './fixtures/json-process.js';

const R = 1_000; // refresh and lease window
const L = 3_000; // lease TTL
const C = 100; // the budget, units per second, for the whole fleet
const FALLBACK = C / 2; // each service's static fallback: an equal share, as explain assumes

const ENVOY_CONFIG = `domain: edge
descriptors:
  - key: generic_key
    value: global
    rate_limit:
      unit: second
      requests_per_unit: ${C}
    sluice:
      algorithm: token-bucket
      name: global-api
`;
// The same limit as a Sluice policy, for `sluice explain` (which reads policy files).
const POLICY_FILE = `policies:
  - name: global-api
    match: [{ key: generic_key }]
    algorithm: token-bucket
    rate: ${C}
    period: 1s
    burst: ${C}
`;
const request = {
  domain: 'edge',
  descriptors: [{ entries: [{ key: 'generic_key', value: 'global' }] }],
};

interface Answer {
  readonly service: number;
  readonly sentMs: number;
  /** The lease window the service decided in (its start, ms since the epoch). */
  readonly windowMs: number;
  readonly ok: boolean;
}
interface RlsReply {
  overallCode: string;
  statuses: { durationUntilReset?: { seconds: string | number; nanos: number } }[];
}

let dir: string;
let redis: RedisServer;
let controller: JsonProcess | undefined;
const serves: Serve[] = [];
/** The gRPC clients of the services the load goes to, by service (none while one is down). */
const clients: (Clients | undefined)[] = [];
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'sluice-serve-leases-'));
  await mkdir(join(dir, 'envoy'));
  await writeFile(join(dir, 'envoy', 'config.yaml'), ENVOY_CONFIG);
  await writeFile(join(dir, 'policies.yaml'), POLICY_FILE);
  redis = await RedisServer.start();
});
afterAll(async () => {
  for (const c of clients) c?.close();
  await Promise.all(serves.map((s) => stopServe(s)));
  controller?.kill('SIGKILL');
  await controller?.ended();
  await redis?.stop();
  await rm(dir, { recursive: true, force: true });
});

interface LeaseRow {
  policy: string;
  mode: 'lease' | 'fallback';
  ratePerSecond: number | null;
  /** The window the lease is enforced over: R for a round's lease. */
  windowMs?: number;
  controller: string | null;
  fencingToken?: number;
}
/** The lease gauges of a service's `/metrics`. */
async function leaseGauges(s: Serve): Promise<{ inForce: number; rate: number }> {
  const text = await (await fetch(`http://127.0.0.1:${s.httpPort}/metrics`)).text();
  const policy = { policy: 'global-api' };
  return {
    inForce: sumOf(text, 'sluice_lease_in_force', policy),
    rate: sumOf(text, 'sluice_lease_rate_units_per_second', policy),
  };
}

async function leaseRow(s: Serve): Promise<LeaseRow> {
  const r = await fetch(`http://127.0.0.1:${s.httpPort}/status?format=json`);
  const body = (await r.json()) as { leases: { inForce: boolean; allocations: LeaseRow[] } };
  expect(body.leases.inForce).toBe(true);
  return body.leases.allocations[0]!;
}

/**
 * Sends one ShouldRateLimit call to each service every 10 ms (100/s each, 2C for the
 * fleet) until `until` resolves. The window an answer belongs to is read from the
 * answer: the lease decision's reset is the time left in its window, and windows are
 * aligned to multiples of R.
 */
function drive(
  answers: Answer[],
  errors: string[],
): { stop: () => Promise<void>; drained: (service: number) => Promise<void> } {
  let running = true;
  const inFlight = new Set<Promise<void>>();
  const inFlightTo = new Map<number, Set<Promise<void>>>();
  const timer = setInterval(() => {
    if (!running) return;
    clients.forEach((c, service) => {
      if (c === undefined) return;
      const sentMs = Date.now();
      const p = call<RlsReply>(c.rls, 'ShouldRateLimit', request, 5_000).then(
        (reply) => {
          const d = reply.statuses[0]!.durationUntilReset!;
          const resetMs = Number(d.seconds) * 1000 + d.nanos / 1e6;
          // The service decided between send and receipt, so the window's end lies in
          // [sent + reset, received + reset] (1 ms either side for rounding): the one
          // multiple of R there, which is unique while the call took less than R.
          const receivedMs = Date.now();
          const windowEnd = Math.ceil((sentMs + resetMs - 1) / R) * R;
          if (windowEnd + R <= receivedMs + resetMs + 1) {
            errors.push(`s${service + 1}: an answer took ${receivedMs - sentMs} ms, ≥ R`);
            return;
          }
          answers.push({
            service,
            sentMs,
            windowMs: windowEnd - R,
            ok: reply.overallCode === 'OK',
          });
        },
        (error: Error) => void errors.push(`s${service + 1}: ${error.message}`),
      );
      inFlight.add(p);
      const toService = inFlightTo.get(service) ?? new Set();
      inFlightTo.set(service, toService.add(p));
      void p.finally(() => {
        inFlight.delete(p);
        toService.delete(p);
      });
    });
  }, 10);
  return {
    stop: async () => {
      running = false;
      clearInterval(timer);
      await Promise.all(inFlight);
    },
    // Closing a channel fails the calls it has not started yet ("Channel closed before
    // call started"): a client is closed only once its last call has its answer.
    drained: async (service) => {
      await Promise.all(inFlightTo.get(service) ?? []);
    },
  };
}

/**
 * Connects to a service and resolves once the channel is connected, so that no call of
 * the load is queued behind a channel that is still being set up.
 */
async function connectReady(port: number): Promise<Clients> {
  const c = connect(port);
  await new Promise<void>((resolve, reject) =>
    c.rls.waitForReady(Date.now() + 10_000, (error) =>
      error === undefined || error === null ? resolve() : reject(error),
    ),
  );
  return c;
}

/** Admitted per service and for the fleet, per whole window inside [from, to). */
function windows(answers: readonly Answer[], from: number, to: number) {
  const rows = new Map<number, number[]>();
  for (const a of answers) {
    if (a.windowMs < from || a.windowMs + R > to) continue;
    const row = rows.get(a.windowMs) ?? [0, 0];
    if (a.ok) row[a.service]! += 1;
    rows.set(a.windowMs, row);
  }
  return [...rows]
    .sort(([x], [y]) => x - y)
    .map(([startMs, [a, b]]) => ({ startMs, s1: a!, s2: b!, fleet: a! + b! }));
}

const ceilR = (ms: number) => Math.ceil(ms / R) * R;

describe('sluice serve as a quota lease agent', () => {
  it('two services split one budget through the controller; with the controller gone, each stays on its bounded fallback', async () => {
    const port = await freePort();
    controller = controllerProcess('c1', [
      ...['--redis', redis.url, '--domain', 'sluice', '--budget', `policy=global-api@${C}`],
      ...['--port', String(port), '--refresh-ms', String(R), '--lease-ttl-ms', String(L)],
    ]);
    // A wait for the event (the CLI starting beside two spinning processes printed nothing
    // in 10 s once), not a bound on its speed.
    const term = (await controller.waitFor((l) => l['event'] === 'leader', 60_000))['token'];
    const serveArgs = [
      ...['--config', join(dir, 'envoy'), '--lease-policies', 'global-api'],
      ...['--lease-fallback', `${FALLBACK}`],
    ];
    const serveEnv = (agent: string) => ({
      SLUICE_LEASE_CONTROLLERS: `127.0.0.1:${port}`,
      SLUICE_LEASE_AGENT: agent,
      SLUICE_LEASE_REFRESH_MS: String(R),
    });
    const started = await Promise.all(
      ['s1', 's2'].map((agent) => spawnServe(serveArgs, serveEnv(agent))),
    );
    serves.push(...started);
    const live = [...started];
    clients.push(...(await Promise.all(started.map((s) => connectReady(s.grpcPort)))));
    const answers: Answer[] = [];
    const errors: string[] = [];
    const load = drive(answers, errors);
    onTestFinished(() => load.stop());

    // Both hold a lease with a share of the budget, over windows of R. A newcomer's first
    // may be a small share sent as whole units per a longer window (5 per 11 s), which
    // the windows of R counted below cannot place.
    await Promise.all(
      live.map((s) =>
        waitFor(
          async () => {
            const row = await leaseRow(s);
            return row.mode === 'lease' && (row.ratePerSecond ?? 0) > 0 && row.windowMs === R
              ? row
              : undefined;
          },
          { what: 'a lease with a share', timeoutMs: 10_000, intervalMs: 50 },
        ),
      ),
    );
    const upFrom = ceilR(Date.now());
    // Five whole windows with the controller up.
    await waitFor(() => (Date.now() >= upFrom + 5 * R ? true : undefined), {
      what: 'five windows on leases',
      timeoutMs: 8_000,
      intervalMs: 50,
    });
    const up = await leaseRow(live[0]!);
    expect(up).toMatchObject({
      policy: 'global-api',
      mode: 'lease',
      controller: `127.0.0.1:${port}`,
      fencingToken: term,
    });
    const upGauges = await leaseGauges(live[0]!);
    expect(upGauges.inForce).toBe(1);
    expect(upGauges.rate).toBeGreaterThan(0);
    expect(upGauges.rate).toBeLessThan(C);
    const splitUntil = Date.now();

    // SIGTERM to the second: it gives its lease back as it leaves, and the first is
    // raised from the freed budget at the next round, not a TTL later.
    const leaving = live[1]!;
    const leavingClient = clients[1]!;
    clients[1] = undefined;
    await load.drained(1);
    leavingClient.close();
    const mark = controller.lines.length;
    await stopServe(leaving);
    expect(await leaving.exited).toEqual({ code: 0, signal: null });
    await controller.waitFor(
      (l) => l['event'] === 'left' && l['agent'] === 's2/global-api',
      5_000,
      mark,
    );
    const raised = await waitFor(
      async () => {
        const row = await leaseRow(live[0]!);
        return (row.ratePerSecond ?? 0) > FALLBACK ? row : undefined;
      },
      { what: 'the first raised above half the budget', timeoutMs: 4 * R, intervalMs: 50 },
    );
    // It comes back under the same name, as a newcomer, and gets a share again.
    const back = await spawnServe(serveArgs, serveEnv('s2'));
    live[1] = back;
    serves.push(back); // stopped by afterAll too
    clients[1] = await connectReady(back.grpcPort);
    await waitFor(
      async () => {
        const row = await leaseRow(back);
        return row.mode === 'lease' && (row.ratePerSecond ?? 0) > 0 ? row : undefined;
      },
      { what: 'a share for the returning service', timeoutMs: 10_000, intervalMs: 50 },
    );

    const killedAt = Date.now();
    controller.kill('SIGKILL');
    await controller.ended();
    // Each service runs on its lease until it expires (at most L after the kill), then on
    // its fallback: wait for that on both, then three whole windows more.
    await Promise.all(
      live.map((s) =>
        waitFor(
          async () => {
            const row = await leaseRow(s);
            return row.mode === 'fallback' ? row : undefined;
          },
          { what: 'the fallback after the lease expired', timeoutMs: L + 3 * R, intervalMs: 50 },
        ),
      ),
    );
    const fallbackFrom = ceilR(Date.now());
    await waitFor(() => (Date.now() >= fallbackFrom + 3 * R ? true : undefined), {
      what: 'three windows on the fallback',
      timeoutMs: 5_000,
      intervalMs: 50,
    });
    await load.stop();
    const endedAt = Date.now();
    const down = await leaseRow(live[1]!);
    expect(down).toMatchObject({ mode: 'fallback', controller: null, ratePerSecond: FALLBACK });
    expect(await leaseGauges(live[1]!)).toEqual({ inForce: 0, rate: FALLBACK });

    // What `sluice explain` prints for this configuration: 2 instances, R, L, the
    // partition as long as it lasted, each on a static equal share.
    const partitionMs = endedAt - killedAt;
    const explainArgs = [
      ...['explain', '--policies', join(dir, 'policies.yaml'), '--instances', '2'],
      ...['--lease-refresh', String(R), '--lease-ttl', String(L)],
      ...['--partition', String(partitionMs), '--fallback', 'static'],
    ];
    const run = promisify(execFile);
    const cli = join(root, 'dist/cli/main.js');
    const text = (await run(process.execPath, [cli, ...explainArgs])).stdout;
    const json = JSON.parse(
      (await run(process.execPath, [cli, ...explainArgs, '--json'])).stdout,
    ) as {
      sections: { title: string; lines: { label: string; value: string }[] }[];
    }[];
    const lease = json[0]!.sections.find((s) => s.title.startsWith('lease'))!;
    const valueOf = (label: string) =>
      Number(lease.lines.find((l) => l.label === label)!.value.replace(/[^0-9.]/g, ''));
    const extraBound = valueOf('units over the budget, at most');
    const peakBound = (valueOf('any window of R, at most') / 100) * C;

    const upWindows = windows(answers, upFrom, splitUntil);
    const churnWindows = windows(answers, ceilR(splitUntil), killedAt);
    const cutWindows = windows(answers, ceilR(killedAt), endedAt);
    const onFallback = windows(answers, fallbackFrom, endedAt);
    const show = (ws: ReturnType<typeof windows>) =>
      ws.map((w) => `${w.s1}+${w.s2}=${w.fleet}`).join(' ');
    console.log(
      [
        `controller up, admitted per ${R} ms window (s1+s2=fleet, budget ${C}): ${show(upWindows)}`,
        `second service stopped (SIGTERM), first raised to ${raised.ratePerSecond}/s, second back: ${show(churnWindows)}`,
        `controller killed, whole windows: ${show(cutWindows)}`,
        `  of which on the fallback (${FALLBACK}/s each): ${show(onFallback)}`,
        `sluice ${explainArgs.join(' ')}`,
        text.trimEnd(),
      ].join('\n'),
    );

    expect(errors).toEqual([]);
    // Up: the controller holds the fleet to the budget, and both services take a share.
    // On separate memory stores, each alone would admit the whole budget.
    expect(upWindows.length).toBeGreaterThanOrEqual(4);
    for (const w of upWindows) {
      expect(w.fleet).toBeLessThanOrEqual(C);
      expect(w.s1).toBeGreaterThan(0);
      expect(w.s2).toBeGreaterThan(0);
    }
    // Across the leave and the return, still within the budget.
    for (const w of churnWindows) expect(w.fleet).toBeLessThanOrEqual(C);
    // Cut off: never more than explain's bound per window, nor over the budget in all.
    expect(cutWindows.length).toBeGreaterThanOrEqual(4);
    for (const w of cutWindows) expect(w.fleet).toBeLessThanOrEqual(peakBound);
    const over = cutWindows.reduce((sum, w) => sum + Math.max(0, w.fleet - C), 0);
    expect(over).toBeLessThanOrEqual(extraBound);
    // On the fallback: bounded (never allow-all), and not deny-all either: each service,
    // driven at twice its fallback, admits in every window of R, the returning one too
    // (its last lease, a newcomer's small share, was 5 units per 11 s: its fallback must
    // still be FALLBACK per R, not 11 s of it at once).
    expect(onFallback.length).toBeGreaterThanOrEqual(2);
    // Each at most its fallback per window: the returning one once showed FALLBACK + 5
    // (the count of a window restarted when its 5-per-11-s lease gave way to the
    // fallback's window of R; QuotaAgent now keeps it across a change of window).
    for (const w of onFallback) {
      expect(w.s1).toBeGreaterThan(0);
      expect(w.s2).toBeGreaterThan(0);
      expect(w.s1).toBeLessThanOrEqual(FALLBACK);
      expect(w.s2).toBeLessThanOrEqual(FALLBACK);
    }

    // Metrics: the lease's units, under the rule's public name.
    const metrics = await (await fetch(`http://127.0.0.1:${live[0]!.httpPort}/metrics`)).text();
    const leaseUnits = { stage: 'lease', policy: 'global-api' };
    const granted = sumOf(metrics, 'sluice_stage_granted_units_total', leaseUnits);
    const spent = sumOf(metrics, 'sluice_stage_spent_units_total', leaseUnits);
    const admittedByFirst = answers.filter((a) => a.service === 0 && a.ok).length;
    expect(spent).toBeGreaterThanOrEqual(upWindows.reduce((sum, w) => sum + w.s1, 0));
    expect(spent).toBeLessThanOrEqual(admittedByFirst);
    expect(granted).toBeGreaterThanOrEqual(spent);

    // SIGTERM: the agents leave and the service exits 0.
    const exits = live.map((s) => s.exited);
    await Promise.all(live.map((s) => stopServe(s)));
    for (const e of await Promise.all(exits)) expect(e).toEqual({ code: 0, signal: null });
  }, 120_000);
});
