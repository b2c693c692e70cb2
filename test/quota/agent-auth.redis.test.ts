/**
 * Authenticated agents, against real processes: a `sluice controller` (the CLI from dist/)
 * serving RLQS over TLS with a client CA, an mTLS allow-list and a token file (certs made
 * with openssl in a temp dir), a real redis-server, and three honest agents (the real
 * `RlqsAgentClient`, each its own process): two with client certificates, one with a
 * bearer token, sharing 100/s. Agents without credentials, with a certificate whose SAN
 * is not allowed, or with a wrong token are refused and counted, and do not move the
 * honest shares. A controller on 0.0.0.0 without agent authentication does not start
 * unless `--insecure-agents` is given. Stopped by PID.
 */
import * as grpc from '@grpc/grpc-js';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RLQS_SERVICE, type WireUsageReports } from '../../src/protocol/rlqs-protos.js';
import { AGENT_METADATA } from '../../src/protocol/metadata.js';
import { RedisServer } from '../support/redis-server.js';
import { issueCert, makeCa, type TestCa, type TestCert } from '../support/test-certs.js';
import {
  agentProcess,
  median,
  nextWindows,
  controllerProcess,
  type JsonLine,
  type JsonProcess,
} from './fixtures/json-process.js';

const TOKEN = 'token-3-0123456789abcdef';
const started: JsonProcess[] = [];
let redis: RedisServer;
let dir: string;
let ca: TestCa;
let honestCert: TestCert;
let otherCert: TestCert;
let controller: JsonProcess;
let port: number;
let httpPort: number;
beforeAll(async () => {
  redis = await RedisServer.start();
  dir = await mkdtemp(join(tmpdir(), 'sluice-agent-auth-'));
  ca = await makeCa(dir, 'agents-ca');
  const server = await issueCert(dir, ca, 'controller', { dns: ['localhost'], ips: ['127.0.0.1'] });
  honestCert = await issueCert(dir, ca, 'honest', { uris: ['spiffe://test/honest'] });
  otherCert = await issueCert(dir, ca, 'other', { uris: ['spiffe://test/other'] });
  await writeFile(
    join(dir, 'certs.yaml'),
    '- identity: URI:spiffe://test/honest\n  agents: ["honest-*"]\n  domains: [test]\n',
  );
  await writeFile(
    join(dir, 'tokens.yaml'),
    `- token: ${TOKEN}\n  agents: ["token-*"]\n  domains: [test]\n`,
  );
  controller = controllerProcess('c1', [
    ...['--redis', redis.url, '--domain', 'test', '--budget', 'name=api@100'],
    ...['--port', '0', '--refresh-ms', '1000'],
    ...['--tls-cert', server.certFile, '--tls-key', server.keyFile, '--client-ca', ca.certFile],
    ...['--agent-certs-file', join(dir, 'certs.yaml')],
    ...['--agent-tokens-file', join(dir, 'tokens.yaml')],
  ]);
  started.push(controller);
  const listening = await controller.waitFor((l) => l['event'] === 'listening', 15_000);
  port = listening['port'] as number;
  httpPort = listening['httpPort'] as number;
  await controller.waitFor((l) => l['event'] === 'leader', 15_000);
  agent('honest-1', withCert(honestCert));
  agent('honest-2', withCert(honestCert));
  agent('token-3', { AGENT_CA: ca.certFile, AGENT_TOKEN: TOKEN });
}, 60_000);
afterAll(async () => {
  for (const p of started) p.kill('SIGKILL');
  await Promise.all(started.map((p) => p.ended()));
  await redis.stop();
  await rm(dir, { recursive: true, force: true });
});

const withCert = (c: TestCert) => ({
  AGENT_CA: ca.certFile,
  AGENT_CERT: c.certFile,
  AGENT_KEY: c.keyFile,
});

function agent(name: string, credentials: Record<string, string>): JsonProcess {
  const p = agentProcess(name, [`127.0.0.1:${port}`], 60, 0, credentials);
  started.push(p);
  return p;
}

/** What `p` admitted in each of its next `n` windows. */
async function nextAdmitted(p: JsonProcess, n: number): Promise<number[]> {
  return (await nextWindows(p, n)).map((w: JsonLine) => w['admitted'] as number);
}

async function settled(p: JsonProcess): Promise<number[]> {
  await p.waitFor(
    (l, i, lines) =>
      l['event'] === 'window' &&
      lines.slice(0, i + 1).filter((x) => x['event'] === 'window' && x['mode'] === 'lease')
        .length >= 5,
    40_000,
  );
  return nextAdmitted(p, 4);
}

async function metrics(): Promise<string> {
  return (await fetch(`http://127.0.0.1:${httpPort}/metrics`)).text();
}
const sample = (text: string, series: string) =>
  Number(
    text
      .split('\n')
      .find((l) => l.startsWith(`${series} `))
      ?.slice(series.length + 1) ?? 0,
  );

describe('authenticated agents', () => {
  it('10 agents without credentials are refused UNAUTHENTICATED and do not cut three honest agents', async () => {
    const honest = started.filter((p) => ['honest-1', 'honest-2', 'token-3'].includes(p.name));
    const before = await Promise.all(honest.map(settled));
    const Client = grpc.makeGenericClientConstructor(RLQS_SERVICE, 'RateLimitQuotaService');
    const statuses = new Map<string, number>();
    const fakes = Array.from({ length: 10 }, (_, i) => {
      const client = new Client(`127.0.0.1:${port}`, grpc.credentials.createSsl(ca.cert));
      return { client, name: `honest-fake-${i}` };
    });
    // Each fake opens a stream every 200 ms claiming 1000 units of demand.
    const attack = setInterval(() => {
      for (const f of fakes) {
        const md = new grpc.Metadata();
        md.set(AGENT_METADATA, f.name);
        const call = (
          f.client as unknown as {
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
        call.write({
          domain: 'test',
          bucketQuotaUsages: [
            {
              bucketId: { bucket: { name: 'api' } },
              timeElapsed: { seconds: 1, nanos: 0 },
              numRequestsAllowed: 1000,
              numRequestsDenied: 1000,
            },
          ],
        });
      }
    }, 200);
    let during: number[][];
    try {
      during = await Promise.all(honest.map((p) => nextAdmitted(p, 6)));
    } finally {
      clearInterval(attack);
      for (const f of fakes) f.client.close();
    }
    console.log(
      `honest admitted per window: before ${before.map((w) => w.join(',')).join(' | ')}; ` +
        `with 10 unauthenticated agents ${during.map((w) => w.join(',')).join(' | ')}; ` +
        `the fakes got ${JSON.stringify(Object.fromEntries(statuses))}`,
    );
    expect([...statuses.keys()]).toEqual(['UNAUTHENTICATED']);
    for (const [i, w] of during.entries())
      for (const n of w) expect(n).toBeGreaterThanOrEqual(0.6 * median(before[i]!));
    const text = await metrics();
    expect(
      sample(text, 'sluice_controller_auth_failures_total{reason="no-credentials"}'),
    ).toBeGreaterThan(10);
    // Sampled: far fewer lines than refusals, the later ones counting those left out.
    const lines = controller.lines.filter((l) => l['event'] === 'auth_failure');
    expect(lines.length).toBeGreaterThan(0);
    expect(lines.length).toBeLessThan(5);
    expect(lines[0]).toMatchObject({
      reason: 'no-credentials',
      agent: expect.stringMatching(/^honest-fake-\d+$/),
    });
    // The honest agents were never refused.
    for (const p of honest)
      expect(p.lines.filter((l) => l['event'] === 'stream_refused')).toEqual([]);
  }, 120_000);

  it('a certificate whose SAN is not allowed, a name its entry does not allow, and a wrong token are refused', async () => {
    const wrongSan = agent('honest-9', withCert(otherCert));
    const wrongName = agent('token-9', withCert(honestCert));
    const wrongToken = agent('token-8', { AGENT_CA: ca.certFile, AGENT_TOKEN: `${TOKEN}x` });
    const refused = await Promise.all(
      [wrongSan, wrongName, wrongToken].map((p) =>
        p.waitFor((l) => l['event'] === 'stream_refused', 20_000),
      ),
    );
    console.log(
      refused
        .map((r) => `${r['agent'] as string}: ${r['code'] as string} "${r['details'] as string}"`)
        .join('; '),
    );
    expect(refused.map((r) => r['code'])).toEqual([
      'PERMISSION_DENIED',
      'PERMISSION_DENIED',
      'UNAUTHENTICATED',
    ]);
    expect(refused[0]!['details']).toContain('spiffe://test/other');
    expect(refused[1]!['details']).toContain('"token-9"');
    const text = await metrics();
    for (const reason of ['unknown-identity', 'agent-not-allowed', 'bad-token'])
      expect(
        sample(text, `sluice_controller_auth_failures_total{reason="${reason}"}`),
      ).toBeGreaterThan(0);
    for (const p of [wrongSan, wrongName, wrongToken]) {
      expect(p.lines.filter((l) => l['event'] === 'lease')).toEqual([]);
      p.kill('SIGKILL');
    }
  }, 60_000);

  it('on 0.0.0.0 without agent authentication the controller does not start, naming the flags; --insecure-agents starts', async () => {
    const args = [
      ...['--redis', redis.url, '--domain', 'test', '--budget', 'name=api@100'],
      ...['--host', '0.0.0.0', '--port', '0', '--prefix', 'insecure'],
    ];
    const refused = controllerProcess('c-open', args);
    started.push(refused);
    await refused.ended();
    console.log(refused.stderr.trim());
    expect(refused.stderr).toContain('SLUICE_ERR_QUOTA_AGENTS_INSECURE');
    for (const flag of [
      '--client-ca',
      '--agent-certs-file',
      '--agent-tokens-file',
      '--insecure-agents',
    ])
      expect(refused.stderr).toContain(flag);
    expect(refused.exitCode).toBe(1);

    const open = controllerProcess('c-insecure', [...args, '--insecure-agents']);
    started.push(open);
    await open.waitFor((l) => l['event'] === 'listening', 15_000);
    open.kill('SIGKILL');
  }, 60_000);
});
