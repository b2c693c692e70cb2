/**
 * A forged `sluice-seen-token` (issue 27): a peer allowed to stream claims it has seen a
 * term far above the leader's. A real `sluice controller` (dist/, built first) with
 * `--term-secret-file` on a real redis-server, raw RLQS streams from this process, and an
 * honest agent in its own process. Every process is stopped by its PID.
 */
import { createHmac } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../support/free-port.js';
import { RedisServer } from '../support/redis-server.js';
import { waitFor } from '../support/wait.js';
import {
  agentProcess,
  controllerProcess,
  type JsonLine,
  type JsonProcess,
} from './fixtures/json-process.js';
import { rawRlqs } from './fixtures/raw-rlqs.js';

const SECRET = 'a-secret-every-controller-shares';
// Bounds on waits for events on a busy machine, not on their speed.
const START_MS = 120_000;
const EVENT_MS = 60_000;
let dir: string;
let redis: RedisServer;
const started: JsonProcess[] = [];
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'sluice-term-secret-'));
  await writeFile(join(dir, 'term-secret'), `${SECRET}\n`);
  redis = await RedisServer.start();
});
afterAll(async () => {
  for (const p of started) p.kill('SIGKILL');
  await Promise.all(started.map((p) => p.ended()));
  await redis.stop();
  await rm(dir, { recursive: true, force: true });
});

const is = (event: string) => (l: JsonLine) => l['event'] === event;
const usage = [
  {
    bucket_id: { bucket: { name: 'api' } },
    time_elapsed: { seconds: 1, nanos: 0 },
    num_requests_allowed: 1,
    num_requests_denied: 0,
  },
];
const sign = (term: number) =>
  createHmac('sha256', SECRET).update(`sluice-term:${term}`).digest('hex');

describe('a forged seen term', () => {
  it('moves nothing: the leader keeps its term and serves the stream; a term it signed still makes it take a higher one', async () => {
    const port = await freePort();
    const c = controllerProcess('c1', [
      ...['--redis', redis.url, '--domain', 'test', '--budget', 'name=api@100'],
      ...['--port', String(port), '--term-secret-file', join(dir, 'term-secret')],
    ]);
    started.push(c);
    const term = (await c.waitFor(is('leader'), START_MS))['token'] as number;
    const address = `127.0.0.1:${port}`;
    const honest = agentProcess('honest', [address], 20, 0);
    started.push(honest);
    await honest.waitFor((l) => is('lease')(l) && l['outcome'] === 'applied', START_MS);

    // Forged: no signature, a wrong one, one of another term. Each stream is served.
    const ch = rawRlqs(address);
    const forged = 2 ** 52;
    const tries: Record<string, string>[] = [
      { 'sluice-seen-token': String(forged) },
      { 'sluice-seen-token': String(forged), 'sluice-seen-sig': 'ab'.repeat(32) },
      { 'sluice-seen-token': String(forged), 'sluice-seen-sig': sign(forged + 1) },
    ];
    const streams = tries.map((md, i) => {
      const s = ch.open(`forger-${i}`, md);
      s.send(usage, 'test');
      return s;
    });
    await waitFor(() => (streams.every((s) => s.actions.length > 0) ? true : undefined), {
      what: 'an assignment on every forged stream',
      timeoutMs: EVENT_MS,
      intervalMs: 50,
    });
    const forgedLines = c.lines.filter(is('forged_seen_token'));
    const afterForgery = c.lines.length;
    for (const s of streams) s.close();

    // Signed by the domain's secret (as a controller of a lost Redis would have): believed.
    const signedTerm = term + 1_000;
    const real = ch.open('agent-of-a-lost-redis', {
      'sluice-seen-token': String(signedTerm),
      'sluice-seen-sig': sign(signedTerm),
    });
    real.send(usage, 'test');
    const refused = await real.ended(EVENT_MS);
    const next = await c.waitFor(is('leader'), EVENT_MS, afterForgery);
    ch.close();
    console.log(
      `term ${term}; forged seen ${forged}: ${streams.filter((s) => s.actions.length > 0).length} of 3 streams served, leader lines ${c.lines.slice(0, afterForgery).filter(is('leader')).length}, step-downs ${c.lines.slice(0, afterForgery).filter(is('step_down')).length}, forged_seen_token lines ${forgedLines.length}; signed seen ${signedTerm}: ${String(refused?.details)}, next term ${String(next['token'])}`,
    );

    const before = c.lines.slice(0, afterForgery);
    expect(before.filter(is('leader')).length).toBe(1);
    expect(before.filter(is('step_down'))).toEqual([]);
    expect(before.filter(is('higher_term_seen'))).toEqual([]);
    expect(forgedLines.length).toBeGreaterThanOrEqual(1);
    expect(forgedLines[0]).toMatchObject({ seen: forged, token: term });
    // The honest agent never left the first term meanwhile.
    const tokens = honest.lines
      .filter((l) => is('lease')(l) && l['outcome'] === 'applied')
      .map((l) => l['token']);
    expect(new Set(tokens.slice(0, 1))).toEqual(new Set([term]));
    // The signed one: refused UNAVAILABLE, and the next term is above it.
    expect(refused?.code).toBe(14);
    expect(next['token'] as number).toBeGreaterThan(signedTerm);
  }, 300_000);
});
