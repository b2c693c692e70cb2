/**
 * The Retry-After honouring fetch helper against a real node:http server that answers
 * with scripted statuses; sleep and random are injected, so the waits are exact.
 */
import { createServer } from 'node:http';
import { afterEach, describe, expect, it } from 'vitest';
import { createRetryingFetch, parseRetryAfter } from '../../src/http/retry-client.js';
import { listen, type Listening } from '../support/listen.js';

const running: Listening[] = [];
afterEach(async () => {
  await Promise.all(running.splice(0).map((s) => s.close()));
});

/** A server that answers each request with the next scripted [status, Retry-After]. */
async function scripted(script: [number, string | undefined][]) {
  const bodies: string[] = [];
  const server = createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => {
      bodies.push(body);
      const [status, retryAfter] = script[Math.min(bodies.length - 1, script.length - 1)]!;
      if (retryAfter !== undefined) res.setHeader('retry-after', retryAfter);
      res.statusCode = status;
      res.end(String(status));
    });
  });
  const s = await listen(server);
  running.push(s);
  return { url: s.url, bodies };
}

function recorder(randoms: number[]) {
  const waits: number[] = [];
  let i = 0;
  return {
    waits,
    random: () => randoms[i++ % randoms.length]!,
    sleep: (ms: number) => {
      waits.push(ms);
      return Promise.resolve();
    },
  };
}

describe('createRetryingFetch', () => {
  it('waits Retry-After plus full jitter that doubles per retry, then returns the success', async () => {
    const { url, bodies } = await scripted([
      [429, '2'],
      [503, '1'],
      [429, undefined],
      [200, undefined],
    ]);
    const r = recorder([0.5, 0.25, 1 - 2 ** -53]);
    const f = createRetryingFetch({ ...r, baseDelayMs: 100, maxRetries: 3 });
    const res = await f(url, { method: 'POST', body: 'transfer-1' });
    expect([res.status, await res.text()]).toEqual([200, '200']);
    // retry n waits retryAfter + random * min(10_000, 100 * 2^n)
    expect(r.waits).toEqual([2_000 + 0.5 * 100, 1_000 + 0.25 * 200, (1 - 2 ** -53) * 400]);
    expect(bodies).toEqual(['transfer-1', 'transfer-1', 'transfer-1', 'transfer-1']);
  });

  it('stops after maxRetries and returns the last 429 as it is', async () => {
    const { url, bodies } = await scripted([[429, '1']]);
    const r = recorder([0]);
    const res = await createRetryingFetch({ ...r, maxRetries: 2 })(url);
    expect([res.status, res.headers.get('retry-after'), await res.text()]).toEqual([
      429,
      '1',
      '429',
    ]);
    expect([bodies.length, r.waits]).toEqual([3, [1_000, 1_000]]);
  });

  it('caps the jitter window, and does not sleep on a Retry-After beyond maxRetryAfterMs', async () => {
    const capped = await scripted([[429, undefined]]);
    const r = recorder([0.5]);
    await createRetryingFetch({ ...r, maxRetries: 6, baseDelayMs: 1_000, maxJitterMs: 3_000 })(
      capped.url,
    );
    expect(r.waits).toEqual([500, 1_000, 1_500, 1_500, 1_500, 1_500]);

    const far = await scripted([[429, '3600']]);
    const r2 = recorder([0.5]);
    const res = await createRetryingFetch({ ...r2, maxRetryAfterMs: 60_000 })(far.url);
    expect([res.status, r2.waits, far.bodies.length]).toEqual([429, [], 1]);
  });

  it('does not retry other statuses, or a request whose body is a stream', async () => {
    const { url, bodies } = await scripted([[500, '1']]);
    const r = recorder([0]);
    expect((await createRetryingFetch(r)(url)).status).toBe(500);
    const limited = await scripted([[429, '1']]);
    const stream = new ReadableStream({
      start(c) {
        c.enqueue(new TextEncoder().encode('once'));
        c.close();
      },
    });
    const res = await createRetryingFetch(r)(limited.url, {
      method: 'POST',
      body: stream,
      duplex: 'half',
    } as RequestInit);
    expect([res.status, limited.bodies, bodies.length, r.waits]).toEqual([429, ['once'], 1, []]);
  });

  it('the default sleep is aborted by the request signal', async () => {
    const { url } = await scripted([[429, '30']]);
    const controller = new AbortController();
    const pending = createRetryingFetch()(url, { signal: controller.signal });
    setTimeout(() => controller.abort(new Error('caller gave up')), 50);
    await expect(pending).rejects.toThrow('caller gave up');
  });

  it('parses delay-seconds and HTTP-dates', () => {
    const now = Date.parse('Mon, 30 Nov 2026 03:00:00 GMT');
    expect(
      [
        '5',
        ' 0 ',
        'Mon, 30 Nov 2026 03:00:07 GMT',
        'Mon, 30 Nov 2026 02:00:00 GMT',
        '-1',
        '1.5',
        'soon',
      ].map((v) => parseRetryAfter(v, now)),
    ).toEqual([5_000, 0, 7_000, 0, undefined, undefined, undefined]);
    expect(parseRetryAfter(null, now)).toBeUndefined();
  });
});
