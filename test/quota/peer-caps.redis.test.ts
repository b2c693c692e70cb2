/**
 * Nothing a peer sends costs the leader its term (issue 27, "bounded by construction"):
 * a real `sluice controller` (dist/, spawned) on a real redis-server, an honest agent in
 * its own process on the RLQS stream, and raw RLQS streams from this process. Five
 * messages of 50,000 unknown buckets are each refused whole with RESOURCE_EXHAUSTED
 * naming the cap; a bucket value over the byte cap with INVALID_ARGUMENT; the log stays
 * a handful of lines; the leader keeps its term; the honest agent keeps its lease.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { RedisServer } from '../support/redis-server.js';
import { agentProcess, controllerProcess, type JsonProcess } from './fixtures/json-process.js';
import { manyBuckets, rawRlqs, type RawEnd } from './fixtures/raw-rlqs.js';

const RESOURCE_EXHAUSTED = 8;
const INVALID_ARGUMENT = 3;

const started: JsonProcess[] = [];
const servers: RedisServer[] = [];
afterAll(async () => {
  for (const p of started) p.kill('SIGKILL');
  await Promise.all(started.map((p) => p.ended()));
  for (const r of servers) await r.stop();
});

async function metrics(port: number): Promise<string> {
  return (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
}
function sample(text: string, series: string): number | undefined {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

describe('peer caps against a real controller', () => {
  it('5 messages of 50,000 unknown buckets: each refused whole, a handful of log lines, same term, the honest agent keeps its lease', async () => {
    const redis = await RedisServer.start();
    servers.push(redis);
    const c = controllerProcess('c1', [
      ...['--redis', redis.url, '--domain', 'test', '--budget', 'name=api@100'],
      ...['--port', '0', '--refresh-ms', '1000'],
    ]);
    started.push(c);
    const listening = await c.waitFor((l) => l['event'] === 'listening', 20_000);
    const leader = await c.waitFor((l) => l['event'] === 'leader', 20_000);
    const address = `127.0.0.1:${listening['port'] as number}`;
    const httpPort = listening['httpPort'] as number;
    const termBefore = sample(await metrics(httpPort), 'sluice_controller_term');
    expect(termBefore).toBe(leader['token']);

    const honest = agentProcess('honest', [address], 20, 0);
    started.push(honest);
    await honest.waitFor((l) => l['event'] === 'lease' && l['outcome'] === 'applied', 20_000);
    const honestFrom = honest.lines.length;
    const linesBefore = c.lines.length;

    // The attack: five streams, each one message of 50,000 buckets the controller has no
    // budget for, then one bucket value of 100 KB.
    const raw = rawRlqs(address);
    const ends: (RawEnd | undefined)[] = [];
    const sentAtMs = Date.now();
    const streams = Array.from({ length: 5 }, (_, k) => {
      const s = raw.open(`flood-${k}`);
      s.send(manyBuckets(50_000, `flood-${k}-`), 'test');
      return s;
    });
    for (const s of streams) ends.push(await s.ended(15_000));
    const long = raw.open('long-value');
    long.send([{ bucket_id: { bucket: { name: 'x'.repeat(100_000) } } }], 'test');
    const longEnd = await long.ended(15_000);
    const attackMs = Date.now() - sentAtMs;

    // Three more of the honest agent's windows after the attack, all on a lease.
    const after = honest.lines.length;
    await honest.waitFor(
      (l, i, lines) =>
        l['event'] === 'window' &&
        lines.slice(0, i + 1).filter((x) => x['event'] === 'window').length >= 3,
      20_000,
      after,
    );
    const attackLines = c.lines.slice(linesBefore);
    const logBytes = attackLines.reduce((n, l) => n + JSON.stringify(l).length + 1, 0);
    const leaderLines = c.lines.filter((l) => l['event'] === 'leader').length;
    const leaderChanges = attackLines.filter(
      (l) => l['event'] === 'leader' || l['event'] === 'step_down',
    ).length;
    const honestWindows = honest.lines
      .slice(honestFrom)
      .filter((l) => l['event'] === 'window')
      .map((l) => `${l['mode'] as string}:${l['admitted'] as number}`);
    const text = await metrics(httpPort);
    const termAfter = sample(text, 'sluice_controller_term');
    console.log(
      JSON.stringify({
        refusals: ends.map((e) => e?.code ?? 'none'),
        details: ends[0]?.details,
        long: longEnd?.code ?? 'none',
        longDetails: longEnd?.details,
        attackMs,
        controllerLogLines: attackLines.length,
        logBytes,
        leaderChanges,
        leaderLines,
        termBefore,
        termAfter,
        honestWindows,
      }),
    );
    raw.close();

    for (const e of ends) {
      expect(e?.code).toBe(RESOURCE_EXHAUSTED);
      expect(e?.details).toContain('--max-buckets-per-message 1000');
    }
    expect(longEnd?.code).toBe(INVALID_ARGUMENT);
    expect(longEnd?.sluiceCode).toBe('SLUICE_ERR_PROTOCOL_BAD_REQUEST');
    expect(longEnd?.details).toContain('--max-bucket-value-bytes');
    // Sampled: one line per reason, not one per bucket (rounds log once per second).
    const refusalLines = attackLines.filter((l) => l['event'] === 'refused');
    expect(refusalLines.length).toBeLessThanOrEqual(4);
    expect(attackLines.filter((l) => l['event'] === 'unknown_bucket')).toEqual([]);
    expect(leaderChanges).toBe(0);
    expect(leaderLines).toBe(1);
    expect(termAfter).toBe(termBefore);
    expect(honestWindows.every((w) => w.startsWith('lease:'))).toBe(true);
    expect(sample(text, 'sluice_controller_refusals_total{reason="buckets-per-message"}')).toBe(5);
    expect(sample(text, 'sluice_controller_refusals_total{reason="bucket-value-bytes"}')).toBe(1);
  }, 120_000);
});
