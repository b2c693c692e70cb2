/**
 * 1,000 agents at the default agents cap (issue 27): a real `sluice controller` (dist/,
 * spawned, default `--max-agents`) on a real redis-server, three honest agents in their
 * own processes and 997 raw RLQS streams from this process, each naming its own agent and
 * claiming demand every second. The leader keeps its term throughout (one `leader` line,
 * no `step_down`, every lease under the first token) and the honest agents stay on a
 * lease above 0. Every process is stopped by its PID.
 */
import { describe, expect, it } from 'vitest';
import { DEFAULT_PEER_CAPS } from '../../src/quota/rlqs/peer-caps.js';
import { RedisServer } from '../support/redis-server.js';
import {
  agentProcess,
  controllerProcess,
  type JsonLine,
  stoppedAfterAll,
} from './fixtures/json-process.js';
import { apiUsage, openFakeAgents, rawRlqs } from './fixtures/raw-rlqs.js';

const AGENTS = DEFAULT_PEER_CAPS.maxAgents;
const HONEST = 3;
const FAKES = AGENTS - HONEST;
const CHANNELS = 8;
const BATCH = 100;
const BUDGET = 1_000;
// Bounds on waits for events on a machine whose cores are busy, not on their speed.
const START_MS = 120_000;
const EVENT_MS = 120_000;

const { started, servers, closers } = stoppedAfterAll();

const is = (event: string) => (l: JsonLine) => l['event'] === event;

describe('1,000 agents at the default agents cap against a real controller', () => {
  it('the leader keeps its term and the honest agents keep a share above 0', async () => {
    const redis = await RedisServer.start();
    servers.push(redis);
    const c = controllerProcess('c1', [
      ...['--redis', redis.url, '--domain', 'test', '--budget', `name=api@${BUDGET}`],
      ...['--port', '0', '--refresh-ms', '1000'],
    ]);
    started.push(c);
    const listening = await c.waitFor(is('listening'), START_MS);
    const term = (await c.waitFor(is('leader'), START_MS))['token'];
    const address = `127.0.0.1:${listening['port'] as number}`;
    const honest = Array.from({ length: HONEST }, (_, k) =>
      agentProcess(`honest-${k}`, [address], 20, 0),
    );
    started.push(...honest);
    for (const h of honest)
      await h.waitFor((l) => is('lease')(l) && l['outcome'] === 'applied', START_MS);

    // The fleet: one stream per agent, each reporting 50 allowed and 50 denied per second.
    const channels = Array.from({ length: CHANNELS }, () => rawRlqs(address));
    for (const ch of channels) closers.push(() => ch.close());
    const joinStart = Date.now();
    const { streams, ends, joined } = openFakeAgents(channels, FAKES, BATCH, {
      endMs: 3_600_000,
      answerMs: EVENT_MS,
    });
    // Claims every second from the first batch on: a stream that reported once and then
    // waited for the rest to join would be idle (2R) and get no lease in the first rounds.
    const claims = setInterval(() => {
      for (let i = 0; i < streams.length; i++)
        if (ends[i] === undefined) streams[i]!.send(apiUsage(50, 50));
    }, 1_000);
    closers.push(() => clearInterval(claims));
    await joined;
    const joinedAt = Date.now();
    // Ten rounds with all 1,000 agents claiming, read from the honest agents' windows.
    const from = honest.map((h) => h.lines.length);
    const cFrom = c.lines.length;
    for (const [k, h] of honest.entries())
      await h.waitFor(
        (l, i, lines) => is('window')(l) && lines.slice(0, i + 1).filter(is('window')).length >= 10,
        EVENT_MS,
        from[k],
      );
    clearInterval(claims);

    const windows = honest.map((h, k) => h.lines.slice(from[k]).filter(is('window')));
    const rates = windows.map((w) => w.map((l) => l['rate'] as number | null));
    const modes = windows.map((w) => w.map((l) => l['mode'] as string));
    const rounds = c.lines.slice(cFrom).filter(is('round'));
    const gaps = rounds
      .slice(1)
      .map((r, i) => (r['atMs'] as number) - (rounds[i]!['atMs'] as number));
    const tokens = new Set(
      honest.flatMap((h) =>
        h.lines.filter((l) => is('lease')(l) && l['outcome'] === 'applied').map((l) => l['token']),
      ),
    );
    const refused = ends.filter((e) => e !== undefined);
    console.log(
      JSON.stringify({
        agents: AGENTS,
        cap: DEFAULT_PEER_CAPS.maxAgents,
        fakesAnsweredInMs: joinedAt - joinStart,
        fakesEnded: refused.length,
        leaderLines: c.lines.filter(is('leader')).length,
        stepDowns: c.lines.filter(is('step_down')).map((l) => l['reason']),
        roundsNotSent: c.lines.filter(is('round_not_sent')).length,
        roundsAfterJoin: rounds.length,
        leasesPerRound: rounds.map((r) => r['leases']),
        maxRoundGapMs: Math.max(...gaps),
        loopDelayMaxMs: Math.max(...rounds.map((r) => r['loopDelayMaxMs'] as number)),
        saveMsMax: Math.max(...rounds.map((r) => r['saveMs'] as number)),
        stepDownLoopDelayMs: c.lines.filter(is('step_down')).map((l) => l['loopDelayMaxMs']),
        committedMax: Math.max(...rounds.map((r) => r['committed'] as number)),
        budget: BUDGET,
        honestRates: rates,
        honestModes: modes.map((m) => [...new Set(m)]),
      }),
    );

    // The term held: one leader line, no step-down, every honest lease under that term.
    expect(c.lines.filter(is('leader')).length).toBe(1);
    expect(c.lines.filter(is('step_down'))).toEqual([]);
    expect([...tokens]).toEqual([term]);
    // Every fake was taken (1,000 at the cap of 1,000) and none was dropped.
    expect(refused).toEqual([]);
    // Rounds went on, each to every agent, and never past the budget.
    expect(rounds.length).toBeGreaterThanOrEqual(5);
    for (const r of rounds) {
      expect(r['leases']).toBe(AGENTS);
      expect(r['committed'] as number).toBeLessThanOrEqual(BUDGET);
    }
    // The honest agents kept a share: on a lease in every window, above 0.
    for (const m of modes) expect(m.every((x) => x === 'lease')).toBe(true);
    for (const r of rates) for (const x of r) expect(x).toBeGreaterThan(0);
  }, 900_000);
});
