/**
 * Twice as many agents as the agents cap (issue 27): a real `sluice controller` (dist/,
 * spawned, `--max-agents 100`) on a real redis-server, three honest agents in their own
 * processes, and 200 raw RLQS streams from this process (4 channels),
 * each naming its own agent and claiming demand every second, opened 50 at a time. Those past the cap are
 * refused with RESOURCE_EXHAUSTED naming it; the honest agents keep a lease above 0
 * (never DENY_ALL); the controller's memory stays bounded.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { RedisServer } from '../support/redis-server.js';
import { waitFor } from '../support/wait.js';
import { agentProcess, controllerProcess, stoppedAfterAll } from './fixtures/json-process.js';
import { apiUsage, openFakeAgents, rawRlqs } from './fixtures/raw-rlqs.js';

const RESOURCE_EXHAUSTED = 8;
// The cap scaled down so that the test is affordable on a shared machine (see the note
// in docs/quota-leases.md, "Caps": at 1,000 agents reporting each second the leader lost
// its term there).
const CAP = 100;
const AGENTS = 2 * CAP;
const CHANNELS = 4;
const BATCH = 50;

const { started, servers, closers } = stoppedAfterAll();

/** A process's resident set in MB, from /proc. */
function rssMb(pid: number): number {
  const line = readFileSync(`/proc/${pid}/status`, 'utf8')
    .split('\n')
    .find((l) => l.startsWith('VmRSS:'))!;
  return Math.round(Number(line.split(/\s+/)[1]) / 1024);
}

describe('agents cap against a real controller', () => {
  it('twice the agents cap claiming demand: those past the cap refused RESOURCE_EXHAUSTED, honest shares stay above 0, memory bounded', async () => {
    const redis = await RedisServer.start();
    servers.push(redis);
    const c = controllerProcess('c1', [
      ...['--redis', redis.url, '--domain', 'test', '--budget', 'name=api@100'],
      ...['--port', '0', '--refresh-ms', '1000', '--max-agents', String(CAP)],
    ]);
    started.push(c);
    const listening = await c.waitFor((l) => l['event'] === 'listening', 20_000);
    await c.waitFor((l) => l['event'] === 'leader', 20_000);
    const address = `127.0.0.1:${listening['port'] as number}`;
    const honest = [0, 1, 2].map((k) => agentProcess(`honest-${k}`, [address], 20, 0));
    started.push(...honest);
    for (const h of honest)
      await h.waitFor((l) => l['event'] === 'lease' && l['outcome'] === 'applied', 20_000);
    const rssBefore = rssMb(c.pid);

    // The fleet: one stream per agent, each reporting 50 allowed and 50 denied per second.
    const channels = Array.from({ length: CHANNELS }, () => rawRlqs(address));
    for (const ch of channels) closers.push(() => ch.close());
    // In batches, each answered (an assignment or a refusal) before the next.
    const { streams, ends, joined } = openFakeAgents(channels, AGENTS, BATCH, {
      endMs: 600_000,
      answerMs: 30_000,
    });
    await joined;
    const claims = setInterval(() => {
      for (let i = 0; i < AGENTS; i++)
        if (ends[i] === undefined) streams[i]!.send(apiUsage(50, 50));
    }, 1_000);
    closers.push(() => clearInterval(claims));
    const refusedCount = () => ends.filter((e) => e !== undefined).length;
    await waitFor(() => (refusedCount() >= AGENTS - CAP ? true : undefined), {
      what: 'the streams past the cap refused',
      timeoutMs: 60_000,
      intervalMs: 200,
    });
    // Five rounds with the admitted fakes claiming demand, read from the honest agents.
    const from = honest.map((h) => h.lines.length);
    for (const [k, h] of honest.entries())
      await h.waitFor(
        (l, i, lines) =>
          l['event'] === 'window' &&
          lines.slice(0, i + 1).filter((x) => x['event'] === 'window').length >= 5,
        60_000,
        from[k],
      );
    const rssAfter = rssMb(c.pid);
    clearInterval(claims);
    const windows = honest.map((h, k) =>
      h.lines.slice(from[k]).filter((l) => l['event'] === 'window'),
    );
    const lastRates = windows.map((w) => w.at(-1)!['rate'] as number | null);
    const modes = windows.map((w) => w.map((l) => l['mode'] as string));
    const refused = ends.filter((e) => e !== undefined);
    const codes = [...new Set(refused.map((e) => e!.code))];
    console.log(
      JSON.stringify({
        agents: AGENTS,
        cap: CAP,
        refused: refused.length,
        codes,
        details: refused[0]?.details,
        honestRatePerAgent: lastRates,
        honestModes: modes,
        rssBeforeMb: rssBefore,
        rssAfterMb: rssAfter,
      }),
    );

    expect(codes).toEqual([RESOURCE_EXHAUSTED]);
    expect(refused[0]?.details).toContain(`--max-agents ${CAP}`);
    // The three honest agents hold three of the places.
    expect(refused.length).toBe(AGENTS - CAP + 3);
    for (const m of modes) expect(m.every((x) => x === 'lease')).toBe(true);
    for (const r of lastRates) expect(r).toBeGreaterThan(0);
    expect(rssAfter - rssBefore).toBeLessThan(150);
  }, 180_000);
});
