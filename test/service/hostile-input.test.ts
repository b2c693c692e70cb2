/**
 * Hostile input against the running service: startService() on the memory store with
 * the example configs, attacked over HTTP (`/json`, `/v1/check`, a raw socket for slow
 * bodies) and gRPC (ShouldRateLimit and Check through a generic client that sends any
 * bytes). Each attack of issue 15's "Hostile input" list has its test; the last one
 * sends 10,000 mixed hostile requests to a fresh service and checks that the metric
 * series and the heap stay bounded, printing the figures before and after.
 */
import { randomBytes } from 'node:crypto';
import net from 'node:net';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import * as grpc from '@grpc/grpc-js';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_DESCRIPTOR_LIMITS } from '../../src/core/descriptor-limits.js';
import { DEFAULT_MAX_SERIES_PER_METRIC } from '../../src/metrics/series-cap.js';
import { RLS_SERVICE, SLUICE_SERVICE } from '../../src/protocol/protos.js';
import type { RunningService, ServeOptions } from '../../src/service/main.js';
import { EXAMPLE_CONFIGS, startLoopbackService } from '../support/loopback-service.js';

const RLS_PATH = RLS_SERVICE.ShouldRateLimit.path;
const CHECK_PATH = SLUICE_SERVICE.Check.path;

/** A service on ephemeral loopback ports whose log lines are kept in `logs`. */
async function serve(extra: Partial<ServeOptions> = {}): Promise<{
  svc: RunningService;
  logs: string[];
  grpcClient: grpc.Client;
  close(): Promise<void>;
}> {
  const logs: string[] = [];
  const svc = await startLoopbackService({
    ...EXAMPLE_CONFIGS,
    logger: pino({ level: 'warn' }, { write: (line: string) => void logs.push(line) }),
    ...extra,
  });
  const grpcClient = new grpc.Client(
    `127.0.0.1:${svc.grpcPort}`,
    grpc.credentials.createInsecure(),
  );
  return {
    svc,
    logs,
    grpcClient,
    close: async () => {
      grpcClient.close();
      await svc.shutdown();
    },
  };
}

interface GrpcAnswer {
  readonly code: number;
  readonly details: string;
  readonly response?: Buffer;
}

/** One unary call of `path` with `bytes` as the request, whatever they are. */
function rawCall(client: grpc.Client, path: string, bytes: Buffer): Promise<GrpcAnswer> {
  return new Promise((resolve) => {
    client.makeUnaryRequest(
      path,
      (b: Buffer) => b,
      (b: Buffer) => b,
      bytes,
      new grpc.Metadata(),
      { deadline: Date.now() + 20_000 },
      (error, response) =>
        resolve(
          error === null
            ? { code: grpc.status.OK, details: '', ...(response ? { response } : {}) }
            : { code: error.code, details: error.details },
        ),
    );
  });
}

const rlsBytes = (request: unknown): Buffer =>
  RLS_SERVICE.ShouldRateLimit.requestSerialize(request as never);
const checkBytes = (request: unknown): Buffer =>
  SLUICE_SERVICE.Check.requestSerialize(request as never);

interface HttpAnswer {
  readonly status: number;
  readonly body: { error?: string; code?: string; overallCode?: string };
}

/** POSTs `body` (a JSON text as is, anything else stringified) to the service. */
async function post(svc: RunningService, path: string, body: unknown): Promise<HttpAnswer> {
  const r = await fetch(`http://127.0.0.1:${svc.httpPort}${path}`, {
    method: 'POST',
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  return { status: r.status, body: (await r.json()) as HttpAnswer['body'] };
}

const entry = (key: string, value: string) => ({ key, value });
const rls = (...descriptors: unknown[]) => ({ domain: 'payments', descriptors });
const overrideDescriptor = (entries: unknown[]) => ({
  entries,
  limit: { requestsPerUnit: 1000, unit: 'MINUTE' },
});

/** Distinct label sets per metric family, from the service's registry. */
async function seriesByFamily(svc: RunningService): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  for (const m of await svc.metrics.registry.getMetricsAsJSON()) {
    const sets = new Set(
      m.values.map((v) => JSON.stringify({ ...v.labels, le: undefined, quantile: undefined })),
    );
    out[m.name] = sets.size;
  }
  return out;
}

const total = (counts: Record<string, number>): number =>
  Object.values(counts).reduce((a, b) => a + b, 0);

async function metricsText(svc: RunningService): Promise<string> {
  return (await fetch(`http://127.0.0.1:${svc.httpPort}/metrics`)).text();
}

/** Opens a raw connection, sends `head`, then one byte of body every `everyMs`; resolves when the server closes it. */
function trickle(
  port: number,
  head: string,
  everyMs: number,
): Promise<{ answer: string; elapsedMs: number }> {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    let answer = '';
    const socket = net.connect(port, '127.0.0.1', () => socket.write(head));
    const timer = setInterval(() => {
      if (!socket.destroyed) socket.write('x');
    }, everyMs);
    // Node's default request timeout is 300 s: a connection still open after 15 s is the defect.
    const giveUp = setTimeout(() => {
      socket.destroy();
      reject(new Error('the server kept the trickling connection open for 15 s'));
    }, 15_000);
    socket.on('data', (d) => (answer += d.toString()));
    socket.on('error', () => undefined);
    socket.on('close', () => {
      clearInterval(timer);
      clearTimeout(giveUp);
      resolve({ answer, elapsedMs: performance.now() - t0 });
    });
  });
}

const slowHead = (path: string) =>
  `POST ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n`;

/** A full collection, so measurements start from the live heap (the flag is set at run time). */
const gc = (() => {
  setFlagsFromString('--expose-gc');
  return runInNewContext('gc') as () => void;
})();

let main: Awaited<ReturnType<typeof serve>>;

beforeAll(async () => {
  main = await serve({ httpRequestTimeoutMs: 2_000, httpHeadersTimeoutMs: 2_000 });
});
afterAll(async () => {
  await main?.close();
});

describe('hostile input: metric series', () => {
  it('request-supplied limits put no request value into a metric label', async () => {
    const { svc } = main;
    // One request per transport first, so the override's own series exist before counting.
    await post(svc, '/json', rls(overrideDescriptor([entry('tenant', 'hostile-value-first')])));
    const first = rls(overrideDescriptor([entry('tenant', 'hostile-grpc-value-first')]));
    await rawCall(main.grpcClient, RLS_PATH, rlsBytes(first));
    // Fill the hot-key table (10 buckets): its series are bounded by its size, not absent.
    for (let i = 0; i < 10; i++) {
      await post(svc, '/json', rls(overrideDescriptor([entry('tenant', `hostile-warm-${i}`)])));
    }
    const before = total(await seriesByFamily(svc));
    for (let i = 0; i < 100; i++) {
      const value = `hostile-value-${i}-${'v'.repeat(200)}`;
      expect(
        (await post(svc, '/json', rls(overrideDescriptor([entry('tenant', value)])))).status,
      ).toBe(200);
      const grpcValue = `hostile-grpc-value-${i}`;
      const answer = await rawCall(
        main.grpcClient,
        RLS_PATH,
        rlsBytes(rls(overrideDescriptor([entry('tenant', grpcValue)]))),
      );
      expect(answer.code).toBe(grpc.status.OK);
    }
    const text = await metricsText(svc);
    expect(text).not.toContain('hostile-value-');
    expect(text).not.toContain('hostile-grpc-value-');
    // the override is reported under the domain's keys only
    expect(text).toContain(
      'sluice_rule_hits_total{domain="payments",rule="payments.tenant",outcome="total_hits"}',
    );
    expect(total(await seriesByFamily(svc))).toBe(before);
  });

  it('caps the series of every metric family and counts what it drops', async () => {
    const { svc } = main;
    const cap = DEFAULT_MAX_SERIES_PER_METRIC;
    // Unique keys under override limits: each key list is a new rule label (5 series).
    const n = Math.ceil(cap / 5) + 100;
    for (let i = 0; i < n; i += 50) {
      await Promise.all(
        Array.from({ length: 50 }, (_, j) =>
          rawCall(
            main.grpcClient,
            RLS_PATH,
            rlsBytes(rls(overrideDescriptor([entry(`hostile-key-${i + j}`, 'v')]))),
          ),
        ),
      );
    }
    const counts = await seriesByFamily(svc);
    for (const [name, sets] of Object.entries(counts)) expect(sets, name).toBeLessThanOrEqual(cap);
    expect(counts['sluice_rule_hits_total']).toBeGreaterThan(cap - 5);
    expect(await metricsText(svc)).toMatch(
      /sluice_metric_series_dropped_total\{metric="sluice_rule_hits_total"\} [1-9]/,
    );
  });
});

describe('hostile input: descriptor limits on every entry point', () => {
  const long = 'x'.repeat(DEFAULT_DESCRIPTOR_LIMITS.maxDescriptorValueLength + 1);
  const valueMessage = /value is 1025 characters long; the limit is 1024/;

  it('refuses a value over 1024 characters on /json, ShouldRateLimit, /v1/check and Check, naming where', async () => {
    const { svc, grpcClient } = main;
    const request = rls({ entries: [entry('tenant', 'ok')] }, { entries: [entry('tenant', long)] });
    const json = await post(svc, '/json', request);
    expect(json.status).toBe(400);
    expect(json.body.code).toBe('SLUICE_ERR_DESCRIPTOR_INVALID');
    expect(json.body.error).toMatch(/descriptors\[1\]\.entries\[0\] \(key "tenant"\)/);
    expect(json.body.error).toMatch(valueMessage);

    const viaGrpc = await rawCall(grpcClient, RLS_PATH, rlsBytes(request));
    expect(viaGrpc.code).toBe(grpc.status.INVALID_ARGUMENT);
    expect(viaGrpc.details).toMatch(/descriptors\[1\]\.entries\[0\] \(key "tenant"\)/);
    expect(viaGrpc.details).toMatch(valueMessage);

    const check = await post(svc, '/v1/check', { entries: [entry('tenant', long)] });
    expect(check.status).toBe(400);
    expect(check.body.error).toMatch(/entries\[0\] \(key "tenant"\)/);
    expect(check.body.error).toMatch(valueMessage);

    const native = await rawCall(
      grpcClient,
      CHECK_PATH,
      checkBytes({ entries: [entry('tenant', long)] }),
    );
    expect(native.code).toBe(grpc.status.INVALID_ARGUMENT);
    expect(native.details).toMatch(valueMessage);
  });

  it('refuses a key over 256 characters on every entry point', async () => {
    const { svc, grpcClient } = main;
    const key = `k${'e'.repeat(256)}`;
    const keyMessage = /key is 257 characters long; the limit is 256/;
    const request = rls({ entries: [entry(key, 'v')] });
    const json = await post(svc, '/json', request);
    expect([json.status, json.body.error]).toEqual([400, expect.stringMatching(keyMessage)]);
    const viaGrpc = await rawCall(grpcClient, RLS_PATH, rlsBytes(request));
    expect([viaGrpc.code, viaGrpc.details]).toEqual([3, expect.stringMatching(keyMessage)]);
    const check = await post(svc, '/v1/check', { entries: [entry(key, 'v')] });
    expect([check.status, check.body.error]).toEqual([400, expect.stringMatching(keyMessage)]);
    const native = await rawCall(
      grpcClient,
      CHECK_PATH,
      checkBytes({ entries: [entry(key, 'v')] }),
    );
    expect([native.code, native.details]).toEqual([3, expect.stringMatching(keyMessage)]);
  });

  it('refuses 100,000 descriptors in one 4 MB gRPC request at once, without stalling the server', async () => {
    const { grpcClient } = main;
    // As reported: 100,000 descriptors, 3.7 MB (gRPC's default limit is 4 MiB).
    const bytes = rlsBytes(
      rls(
        ...Array.from({ length: 100_000 }, (_, i) => ({
          entries: [entry('tenant', `tenant-${String(i).padStart(16, '0')}`)],
        })),
      ),
    );
    // The service runs in this process: the longest event-loop block is how long every
    // other call (a /healthcheck, another tenant's check) would have waited. On a busy
    // machine that block also holds the time the process was not scheduled at all, so the
    // bound is on the CPU time the whole call used (client, server, every thread): no
    // single block of the server's own work can be longer. Building the request left
    // garbage; collected first, so the measure is the call's.
    gc();
    const delay = monitorEventLoopDelay({ resolution: 5 });
    delay.enable();
    const cpu0 = process.cpuUsage();
    const t0 = performance.now();
    const answer = await rawCall(grpcClient, RLS_PATH, bytes);
    const elapsedMs = performance.now() - t0;
    const cpu = process.cpuUsage(cpu0);
    delay.disable();
    const maxBlockMs = delay.max / 1e6;
    const cpuMs = (cpu.user + cpu.system) / 1000;
    console.log(
      `100,000 descriptors (${(bytes.length / 2 ** 20).toFixed(1)} MiB): answered in ${elapsedMs.toFixed(0)} ms, ` +
        `longest event-loop block ${maxBlockMs.toFixed(0)} ms, CPU time ${cpuMs.toFixed(0)} ms`,
    );
    expect(answer.code).toBe(grpc.status.INVALID_ARGUMENT);
    expect(answer.details).toMatch(/the request has 100000 descriptors; the limit is 64/);
    // Decoding and deciding them blocked for 1.6 s, and decoding alone for 0.3-0.8 s on
    // this machine; the count is read off the bytes before decoding now. The CPU time is
    // printed above, not asserted: a fixed cap on it breaks on a loaded machine and says
    // nothing a decoder faster than the cap would not also pass (a server that decodes
    // first used 150-260 ms of CPU here and blocked 85-130 ms). That it never decodes is
    // shown by behaviour instead: one more descriptor whose entry
    // is no Entry message (the byte ff). Decoded, it would be refused as malformed; refused
    // on its count, it never is.
    const poisoned = Buffer.concat([bytes, Buffer.from('12030a01ff', 'hex')]);
    const refused = await rawCall(grpcClient, RLS_PATH, poisoned);
    expect([refused.code, refused.details]).toEqual([
      grpc.status.INVALID_ARGUMENT,
      expect.stringMatching(/the request has 100001 descriptors; the limit is 64/),
    ]);
  });

  it('caps descriptors per request and entries per descriptor on every entry point', async () => {
    const { svc, grpcClient } = main;
    const many = Array.from({ length: 65 }, (_, i) => ({ entries: [entry('tenant', `m${i}`)] }));
    const json = await post(svc, '/json', rls(...many));
    expect([json.status, json.body.error]).toEqual([
      400,
      expect.stringMatching(/the request has 65 descriptors; the limit is 64/),
    ]);
    const wide = Array.from({ length: 33 }, (_, i) => entry(`k${i}`, 'v'));
    const entriesMessage = /descriptors\[0\] has 33 entries; the limit is 32/;
    const jsonWide = await post(svc, '/json', rls({ entries: wide }));
    expect([jsonWide.status, jsonWide.body.error]).toEqual([
      400,
      expect.stringMatching(entriesMessage),
    ]);
    const grpcWide = await rawCall(grpcClient, RLS_PATH, rlsBytes(rls({ entries: wide })));
    expect([grpcWide.code, grpcWide.details]).toEqual([3, expect.stringMatching(entriesMessage)]);
    const checkWide = await post(svc, '/v1/check', { entries: wide });
    expect([checkWide.status, checkWide.body.error]).toEqual([
      400,
      expect.stringMatching(/the descriptor has 33 entries; the limit is 32/),
    ]);
    const nativeWide = await rawCall(grpcClient, CHECK_PATH, checkBytes({ entries: wide }));
    expect([nativeWide.code, nativeWide.details]).toEqual([
      3,
      expect.stringMatching(/the descriptor has 33 entries; the limit is 32/),
    ]);
    // At the limits, a request is answered.
    const full = Array.from({ length: 64 }, (_, i) => ({
      entries: Array.from({ length: 32 }, (_, j) => entry(`k${j}`, `full-${i}`)),
    }));
    expect((await post(svc, '/json', rls(...full))).status).toBe(200);
    expect((await rawCall(grpcClient, RLS_PATH, rlsBytes(rls(...full)))).code).toBe(grpc.status.OK);
  });
});

describe('hostile input: malformed text and bytes', () => {
  it('answers a lone UTF-16 surrogate in a /json value with 400 naming the field, and logs nothing', async () => {
    const { svc, logs } = main;
    const logged = logs.length;
    const body =
      '{"domain":"payments","descriptors":[{"entries":[{"key":"tenant","value":"a\\ud800"}]}]}';
    const json = await post(svc, '/json', body);
    expect(json.status).toBe(400);
    expect(json.body.code).toBe('SLUICE_ERR_DESCRIPTOR_INVALID');
    expect(json.body.error).toMatch(
      /descriptors\[0\]\.entries\[0\] \(key "tenant"\): value contains a lone UTF-16 surrogate/,
    );
    const check = await post(svc, '/v1/check', '{"entries":[{"key":"tenant","value":"\\udc00"}]}');
    expect(check.status).toBe(400);
    expect(logs.slice(logged)).toEqual([]);
  });

  it('answers garbage protobuf with INVALID_ARGUMENT, never INTERNAL', async () => {
    const { grpcClient, logs } = main;
    const logged = logs.length;
    const garbage = [
      Buffer.from([0xff, 0xff, 0xff, 0xff, 0xff]),
      Buffer.from([0x12, 0x40, 0x0a]), // descriptors field claiming 64 bytes, 1 present
      Buffer.from([0x0f]), // wire type 7
      rlsBytes(rls({ entries: [entry('tenant', 'cut')] })).subarray(0, 9),
    ];
    for (const bytes of garbage) {
      const answer = await rawCall(grpcClient, RLS_PATH, bytes);
      expect(answer.code, bytes.toString('hex')).toBe(grpc.status.INVALID_ARGUMENT);
      expect(answer.details).toMatch(/not a valid RateLimitRequest message/);
      const check = await rawCall(grpcClient, CHECK_PATH, bytes);
      expect(check.code, bytes.toString('hex')).toBe(grpc.status.INVALID_ARGUMENT);
      expect(check.details).toMatch(/not a valid CheckRequest message/);
    }
    expect(logs.slice(logged)).toEqual([]);
  });

  it('cuts off a body trickled at 2 bytes/s, and headers trickled likewise, with 408', async () => {
    const { svc } = main;
    const [body, headers] = await Promise.all([
      trickle(svc.httpPort, slowHead('/json'), 500),
      trickle(svc.httpPort, 'POST /json HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ', 500),
    ]);
    console.log(
      `trickled body closed after ${body.elapsedMs.toFixed(0)} ms, headers after ${headers.elapsedMs.toFixed(0)} ms (timeouts 2,000 ms)`,
    );
    expect(body.answer).toMatch(/^HTTP\/1\.1 408 /);
    expect(headers.answer).toMatch(/^HTTP\/1\.1 408 /);
  });
});

// --- 10,000 hostile requests -------------------------------------------------------

interface Figures {
  readonly series: number;
  readonly metricsBytes: number;
  readonly heapUsedMb: number;
  readonly rssMb: number;
}

async function figures(svc: RunningService): Promise<Figures> {
  for (let i = 0; i < 3; i++) gc();
  const mem = process.memoryUsage();
  return {
    series: total(await seriesByFamily(svc)),
    metricsBytes: Buffer.byteLength(await metricsText(svc)),
    heapUsedMb: mem.heapUsed / 2 ** 20,
    rssMb: mem.rss / 2 ** 20,
  };
}

/** One hostile request: its kind, and whether it got the answer it must get (else what it got). */
type Attack = () => Promise<{ readonly kind: string; readonly wrong?: string }>;

/**
 * The mix of 10,000. Request bodies are built when sent, so the heap measured afterwards
 * holds the service's leftovers, not the test's.
 */
function attacks(s: Awaited<ReturnType<typeof serve>>): Attack[] {
  const { svc, grpcClient } = s;
  const list: Attack[] = [];
  const add = (n: number, make: (i: number) => Attack): void => {
    for (let i = 0; i < n; i++) list.push(make(i));
  };
  const http =
    (kind: string, path: string, expected: number, body: () => unknown): Attack =>
    async () => {
      const r = await post(svc, path, body());
      return r.status === expected
        ? { kind }
        : { kind, wrong: `HTTP ${r.status} ${JSON.stringify(r.body).slice(0, 200)}` };
    };
  const call =
    (kind: string, path: string, expected: number, bytes: () => Buffer): Attack =>
    async () => {
      const r = await rawCall(grpcClient, path, bytes());
      return r.code === expected ? { kind } : { kind, wrong: `gRPC ${r.code} ${r.details}` };
    };
  const unique = randomBytes(4).toString('hex');
  const ovr = (key: string, value: string) => rls(overrideDescriptor([entry(key, value)]));
  const plain = (key: string, value: string) => rls({ entries: [entry(key, value)] });
  const oversize = (i: number) => `${i}-${'o'.repeat(2_000 + i * 12)}`;
  const descriptors = (n: number) =>
    rls(...Array.from({ length: n }, (_, i) => ({ entries: [entry('tenant', `d${i}`)] })));
  const wide = () => Array.from({ length: 100 }, (_, i) => entry(`k${i}`, 'v'));

  // 2,500 request-supplied limits with unique values: new buckets, never new series
  add(1_250, (i) =>
    http('override value /json', '/json', 200, () => ovr('tenant', `${unique}-${i}`)),
  );
  add(1_250, (i) =>
    call('override value gRPC', RLS_PATH, 0, () => rlsBytes(ovr('tenant', `${unique}-g${i}`))),
  );
  // 1,000 request-supplied limits with unique keys: new rule labels, up to the cap
  add(1_000, (i) =>
    call('override key gRPC', RLS_PATH, 0, () => rlsBytes(ovr(`key-${unique}-${i}`, 'v'))),
  );
  // 1,500 oversize values: 20 of 900 KB, the rest 2-8 KB, over every entry point
  add(20, (i) =>
    http('oversize /json', '/json', 400, () => plain('tenant', `${i}${'h'.repeat(900_000)}`)),
  );
  add(500, (i) => http('oversize /json', '/json', 400, () => ovr('tenant', oversize(i))));
  add(500, (i) => call('oversize gRPC', RLS_PATH, 3, () => rlsBytes(plain('tenant', oversize(i)))));
  add(240, (i) =>
    http('oversize /v1/check', '/v1/check', 400, () => ({ descriptor: { tenant: oversize(i) } })),
  );
  add(240, (i) =>
    call('oversize Check', CHECK_PATH, 3, () =>
      checkBytes({ entries: [entry('tenant', oversize(i))] }),
    ),
  );
  // 1,000 with too many descriptors
  add(500, () =>
    call('too many descriptors gRPC', RLS_PATH, 3, () => rlsBytes(descriptors(1_000))),
  );
  add(500, () => http('too many descriptors /json', '/json', 400, () => descriptors(65)));
  // 1,000 with too many entries in a descriptor
  add(500, () =>
    call('too many entries gRPC', RLS_PATH, 3, () => rlsBytes(rls({ entries: wide() }))),
  );
  add(250, () => http('too many entries /json', '/json', 400, () => rls({ entries: wide() })));
  add(250, () =>
    call('too many entries Check', CHECK_PATH, 3, () => checkBytes({ entries: wide() })),
  );
  // 1,000 lone surrogates (gRPC cannot carry one: protobuf strings are UTF-8, and invalid
  // UTF-8 reads as U+FFFD, so those are ordinary values)
  add(400, (i) =>
    http(
      'surrogate /json',
      '/json',
      400,
      () =>
        `{"domain":"payments","descriptors":[{"entries":[{"key":"tenant","value":"${i}\\ud800"}]}]}`,
    ),
  );
  add(300, (i) =>
    http('surrogate /v1/check', '/v1/check', 400, () => `{"descriptor":{"tenant":"${i}\\udfff"}}`),
  );
  add(300, (i) =>
    call('surrogate gRPC (read as U+FFFD)', RLS_PATH, 0, () =>
      rlsBytes(plain('tenant', `${unique}-${i}\ud800`)),
    ),
  );
  // 1,000 garbage protobuf
  add(500, () =>
    call('garbage ShouldRateLimit', RLS_PATH, 3, () =>
      Buffer.concat([Buffer.from([0x0f]), randomBytes(64)]),
    ),
  );
  add(500, () =>
    call('garbage Check', CHECK_PATH, 3, () =>
      Buffer.concat([Buffer.from([0x12, 0x7f]), randomBytes(16)]),
    ),
  );
  // 500 long keys
  add(500, (i) =>
    call('long key gRPC', RLS_PATH, 3, () => rlsBytes(plain(`${i}${'k'.repeat(300)}`, 'v'))),
  );
  // 480 native checks with unique tenants: new buckets
  add(480, (i) =>
    http('unique tenant /v1/check', '/v1/check', 200, () => ({
      descriptor: { tenant: `${unique}-n${i}` },
    })),
  );
  // 20 trickled bodies, cut off by the request timeout
  add(20, () => async () => {
    const kind = 'slow body';
    try {
      const r = await trickle(svc.httpPort, slowHead('/json'), 500);
      return r.answer.startsWith('HTTP/1.1 408') ? { kind } : { kind, wrong: r.answer };
    } catch (error) {
      return { kind, wrong: String(error) };
    }
  });
  return list;
}

describe('hostile input: 10,000 requests', () => {
  it('leaves the metric series and the heap bounded', { timeout: 180_000 }, async () => {
    // 5 s: long enough that no honest request of the 10,000 runs into it on a loaded
    // machine (1 s cut one off, an empty answer, at a load average of 17-24), short enough
    // that the trickled bodies get their 408 well before trickle()'s 15 s.
    const s = await serve({ httpRequestTimeoutMs: 5_000, httpHeadersTimeoutMs: 5_000 });
    try {
      const { svc } = s;
      // A few ordinary calls first, so the baseline has the series normal traffic creates.
      await post(svc, '/json', rls({ entries: [entry('tenant', 'warm')] }));
      await post(svc, '/v1/check', { descriptor: { tenant: 'warm' } });
      await rawCall(s.grpcClient, RLS_PATH, rlsBytes(rls({ entries: [entry('tenant', 'warm')] })));
      const before = await figures(svc);
      let list = attacks(s);
      expect(list).toHaveLength(10_000);
      // Shuffled, so every kind runs alongside the others; 64 in flight at a time.
      for (let i = list.length - 1; i > 0; i--) {
        const j = Math.floor(Math.random() * (i + 1));
        [list[i], list[j]] = [list[j]!, list[i]!];
      }
      const tally: Record<string, number> = {};
      const wrong: Record<string, string> = {};
      const t0 = performance.now();
      let next = 0;
      await Promise.all(
        Array.from({ length: 64 }, async () => {
          while (next < list.length) {
            const r = await list[next++]!();
            const key = r.wrong === undefined ? r.kind : `${r.kind}: WRONG ANSWER`;
            tally[key] = (tally[key] ?? 0) + 1;
            if (r.wrong !== undefined) wrong[r.kind] ??= r.wrong;
          }
        }),
      );
      const elapsedMs = performance.now() - t0;
      list = [];
      const after = await figures(svc);
      const counts = await seriesByFamily(svc);
      const row = (name: string, f: Figures) =>
        `${name.padEnd(7)} series ${String(f.series).padStart(6)}  /metrics ${(f.metricsBytes / 1024).toFixed(1).padStart(8)} KiB` +
        `  heapUsed ${f.heapUsedMb.toFixed(1).padStart(7)} MiB  RSS ${f.rssMb.toFixed(1).padStart(7)} MiB`;
      console.log(
        [
          `10,000 hostile requests in ${(elapsedMs / 1000).toFixed(1)} s:`,
          ...Object.entries(tally)
            .sort()
            .map(([k, v]) => `  ${String(v).padStart(5)} ${k}`),
          row('before', before),
          row('after', after),
          `series per family after: ${JSON.stringify(counts)}`,
        ].join('\n'),
      );
      expect(wrong).toEqual({});
      expect(Object.values(tally).reduce((a, b) => a + b, 0)).toBe(10_000);
      const cap = DEFAULT_MAX_SERIES_PER_METRIC;
      for (const [name, sets] of Object.entries(counts))
        expect(sets, name).toBeLessThanOrEqual(cap);
      // Only the rule hits (request-supplied keys) and the per-policy families of their
      // policies grow (decisions, remaining ratio, active keys), each within the cap, and
      // the hot-key table fills to its 10 entries.
      expect(after.series).toBeLessThanOrEqual(before.series + 4 * cap + 20);
      expect(after.metricsBytes).toBeLessThan(2 * 1024 * 1024);
      expect(after.heapUsedMb - before.heapUsedMb).toBeLessThan(64);
      expect(s.logs.filter((l) => l.includes('"level":50'))).toEqual([]);
    } finally {
      await s.close();
    }
  });
});
