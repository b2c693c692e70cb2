/**
 * One lease per agent identity, against real processes: a `sluice controller` (the CLI
 * from dist/), a real redis-server, three honest quota agents (the real `RlqsAgentClient`,
 * each its own process) sharing a budget of 100/s, and then (a) a second agent process
 * under the victim's name and (b) a stream opened and half-closed under a victim's name
 * every 150 ms. The second stream is refused (ALREADY_EXISTS, naming the agent), counted
 * and logged; the victim keeps its stream and its share. Stopped by PID.
 */
import * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RLQS_SERVICE, type WireUsageReports } from '../../src/protocol/rlqs-protos.js';
import { AGENT_METADATA } from '../../src/protocol/metadata.js';
import { RedisServer } from '../support/redis-server.js';
import {
  agentProcess,
  median,
  nextWindows,
  controllerProcess,
  type JsonProcess,
} from './fixtures/json-process.js';

const started: JsonProcess[] = [];
let redis: RedisServer;
let controller: JsonProcess;
let port: number;
let httpPort: number;
beforeAll(async () => {
  redis = await RedisServer.start();
  controller = controllerProcess('c1', [
    ...['--redis', redis.url, '--domain', 'test', '--budget', 'name=api@100'],
    ...['--port', '0', '--refresh-ms', '1000'],
  ]);
  started.push(controller);
  const listening = await controller.waitFor((l) => l['event'] === 'listening', 15_000);
  port = listening['port'] as number;
  httpPort = listening['httpPort'] as number;
  await controller.waitFor((l) => l['event'] === 'leader', 15_000);
  for (const name of ['victim', 'honest-2', 'honest-3']) agent(name);
}, 30_000);
afterAll(async () => {
  for (const p of started) p.kill('SIGKILL');
  await Promise.all(started.map((p) => p.ended()));
  await redis.stop();
});

function agent(name: string): JsonProcess {
  const p = agentProcess(name, [`127.0.0.1:${port}`], 60, 0);
  started.push(p);
  return p;
}

const windows = (p: JsonProcess, fromMs: number) =>
  p.lines.filter((l) => l['event'] === 'window' && (l['seenAtMs'] as number) >= fromMs);
/** Streams a leader accepted (it sent its fencing token). */
const accepted = (p: JsonProcess) =>
  p.lines.filter((l) => l['event'] === 'stream' && Number.isFinite(l['token'])).length;

/** The victim's admitted per window once the three shares have settled: ~33 each. */
async function settledBaseline(p: JsonProcess): Promise<number[]> {
  await p.waitFor(
    (l, i, lines) =>
      l['event'] === 'window' &&
      lines.slice(0, i + 1).filter((x) => x['event'] === 'window' && x['mode'] === 'lease')
        .length >= 5,
    30_000,
  );
  return (await nextWindows(p, 4)).map((w) => w['admitted'] as number);
}

async function metric(series: string): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${httpPort}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? 0 : Number(line.slice(series.length + 1));
}

describe('one lease per agent identity', () => {
  it('a second live stream under one name is refused with ALREADY_EXISTS, counted and logged; the first keeps its lease; once it ends, the name is accepted again', async () => {
    const victim = started.find((p) => p.name === 'victim')!;
    const baseline = await settledBaseline(victim);
    const streamsBefore = accepted(victim);
    const duplicatesBefore = await metric('sluice_controller_duplicate_agents_total');

    const duplicate = agent('victim');
    const refusal = await duplicate.waitFor((l) => l['event'] === 'stream_refused', 15_000);
    const during = (await nextWindows(victim, 6)).map((w) => w['admitted'] as number);
    const duplicateGot = windows(duplicate, 0).map((w) => w['admitted'] as number);
    const logged = controller.lines.filter((l) => l['event'] === 'duplicate_agent');
    console.log(
      `victim admitted per window: before ${baseline.join(',')}; with a duplicate ${during.join(',')}; ` +
        `the duplicate: ${refusal['code'] as string} "${refusal['details'] as string}", admitted ${duplicateGot.join(',')}`,
    );
    expect(refusal).toMatchObject({ code: 'ALREADY_EXISTS' });
    expect(refusal['details']).toContain('"victim"');
    expect(accepted(duplicate)).toBe(0);
    expect(duplicateGot.every((n) => n === 0)).toBe(true);
    // The victim never lost its stream, and its share did not move.
    expect(accepted(victim)).toBe(streamsBefore);
    for (const n of during) expect(n).toBeGreaterThanOrEqual(0.6 * median(baseline));
    expect(logged[0]).toMatchObject({ agent: 'victim' });
    expect(await metric('sluice_controller_duplicate_agents_total')).toBeGreaterThan(
      duplicatesBefore,
    );

    // The first ends (killed: its connection closes): the name is free again.
    victim.kill('SIGKILL');
    await victim.ended();
    const lease = await duplicate.waitFor(
      (l) => l['event'] === 'lease' && l['outcome'] === 'applied',
      20_000,
    );
    expect(lease['token']).toEqual(expect.any(Number));
    duplicate.kill('SIGKILL');
    await duplicate.ended();
  }, 120_000);

  it("a stream opened and half-closed under a victim's name every 150 ms does not cut its admissions", async () => {
    const victim = started.find((p) => p.name === 'honest-2')!;
    // The shares settle again after the first test's agents left (two agents now).
    await nextWindows(victim, 3);
    const baseline = await settledBaseline(victim);
    const streamsBefore = accepted(victim);
    const Client = grpc.makeGenericClientConstructor(RLQS_SERVICE, 'RateLimitQuotaService');
    const client = new Client(`127.0.0.1:${port}`, grpc.credentials.createInsecure());
    const statuses = new Map<string, number>();
    const attack = setInterval(() => {
      const md = new grpc.Metadata();
      md.set(AGENT_METADATA, 'honest-2');
      const call = (
        client as unknown as {
          StreamRateLimitQuotas(
            m: grpc.Metadata,
          ): grpc.ClientDuplexStream<WireUsageReports, unknown>;
        }
      ).StreamRateLimitQuotas(md);
      call.on('data', () => {});
      call.on('error', (e: grpc.ServiceError) => {
        const code = grpc.status[e.code];
        statuses.set(code, (statuses.get(code) ?? 0) + 1);
      });
      call.on('status', (s: grpc.StatusObject) => {
        if (s.code === grpc.status.OK) statuses.set('OK', (statuses.get('OK') ?? 0) + 1);
      });
      call.write({
        domain: 'test',
        bucketQuotaUsages: [
          {
            bucketId: { bucket: { name: 'api' } },
            timeElapsed: { seconds: 1, nanos: 0 },
            numRequestsAllowed: 0,
            numRequestsDenied: 0,
          },
        ],
      });
      call.end();
    }, 150);
    let during: number[];
    try {
      during = (await nextWindows(victim, 6)).map((w) => w['admitted'] as number);
    } finally {
      clearInterval(attack);
      client.close();
    }
    console.log(
      `victim admitted per window: before ${baseline.join(',')}; under the half-close attack ${during.join(',')}; ` +
        `the attacker's streams: ${JSON.stringify(Object.fromEntries(statuses))}`,
    );
    expect(accepted(victim)).toBe(streamsBefore);
    for (const n of during) expect(n).toBeGreaterThanOrEqual(0.6 * median(baseline));
    expect(statuses.get('ALREADY_EXISTS') ?? 0).toBeGreaterThan(10);
    expect(statuses.get('OK') ?? 0).toBe(0);
  }, 120_000);
});
