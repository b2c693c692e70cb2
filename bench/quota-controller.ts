/**
 * The quota controller's cost per refresh round (issue 18): `npx tsx bench/quota-controller.ts
 * [--agents 10000] [--rounds 60]`. One bucket, `--agents` agents reporting every round
 * with shifting demand (total 1.3 × budget), refresh 1 s on a virtual clock. A round here
 * is what the leader does each refresh: take every agent's report, then compute and issue
 * every lease. Prints CPU time (process.cpuUsage, user + system) per round: median, p95
 * and max over `--rounds` rounds after 10 warm-up rounds. Transport and Redis writes are
 * not included; the size of the state a leader saves each round, and the CPU to serialize
 * it, are printed beside. Nothing asserts on timings.
 */
import { QuotaController } from '../src/quota/controller.js';
import type { Lease } from '../src/quota/lease.js';

function arg(name: string, fallback: number): number {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? Number(process.argv[i + 1]) : fallback;
}

const agents = arg('agents', 10_000);
const rounds = arg('rounds', 60);
const budget = 100 * agents;
const controller = new QuotaController({ budgets: [{ bucket: 'b', ratePerSecond: budget }] }, 1);
const held = new Map<string, Lease>();
const cpuMs: number[] = [];
for (let k = 0; k < rounds + 10; k++) {
  const nowMs = k * 1_000;
  const start = process.cpuUsage();
  for (let i = 0; i < agents; i++) {
    const agent = String(i);
    // Uneven demand that shifts every round: 1.3 × budget in all.
    const wave = 1 + 0.6 * Math.sin(2 * Math.PI * (k / 60 + i / agents));
    const demand = 130 * wave;
    const lease = held.get(agent);
    const allowed = Math.min(demand, lease?.rate ?? 0);
    const first = controller.report(
      {
        agent,
        bucket: 'b',
        allowed,
        denied: demand - allowed,
        elapsedMs: 1_000,
        ...(lease === undefined ? {} : { heldVersion: lease.version }),
      },
      nowMs,
    );
    if (first !== undefined) held.set(agent, first);
  }
  for (const lease of controller.round(nowMs).leases) held.set(lease.agent, lease);
  const used = process.cpuUsage(start);
  if (k >= 10) cpuMs.push((used.user + used.system) / 1000);
}
// What the process adds per round: the state it saves (fenced) before sending leases.
const saveStart = process.cpuUsage();
const json = JSON.stringify(controller.state());
const saved = process.cpuUsage(saveStart);
cpuMs.sort((a, b) => a - b);
const at = (q: number) => cpuMs[Math.min(cpuMs.length - 1, Math.floor(q * cpuMs.length))]!;
const committed = controller.committed('b', (rounds + 10) * 1_000);
process.stdout.write(
  `${JSON.stringify({
    agents,
    rounds,
    node: process.version,
    cpuMsPerRound: { median: at(0.5), p95: at(0.95), max: cpuMs[cpuMs.length - 1] },
    shareOfOneCoreAt1sRefresh: at(0.5) / 1_000,
    stateJsonBytes: json.length,
    stateJsonCpuMs: (saved.user + saved.system) / 1000,
    committedOverBudget: committed / budget,
  })}\n`,
);
