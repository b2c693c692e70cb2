/**
 * The retrying fetch's adaptive throttle and retry budget against a real node:http
 * backend; time is a manual clock, randomness seeded, sleeps instant.
 */
import { createServer } from 'node:http';
import { afterEach, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/core/clock.js';
import { createRetryingFetch } from '../../src/http/retry-client.js';
import { ClientThrottle, OverloadError } from '../../src/overload.js';
import { mulberry32 } from '../support/random.js';
import { listen, type Listening } from '../support/listen.js';

const running: Listening[] = [];
afterEach(async () => {
  await Promise.all(running.splice(0).map((s) => s.close()));
});

/** A backend answering `status()` to every request, counting what reaches it. */
async function backend(status: () => number) {
  const seen = { count: 0 };
  const server = createServer((_req, res) => {
    seen.count++;
    res.statusCode = status();
    res.setHeader('retry-after', '0');
    res.end();
  });
  const s = await listen(server);
  running.push(s);
  return { url: s.url, seen };
}

const instant = () => Promise.resolve();

describe('createRetryingFetch: adaptive throttle (SRE) and retry budget', () => {
  it('a backend refusing everything sees about 1 - maxRejectProbability of the requests; once it recovers, the client sends again', async () => {
    let status = 503;
    const { url, seen } = await backend(() => status);
    const clock = new ManualClock(0);
    const throttle = new ClientThrottle({ k: 2, windowMs: 120_000, clock });
    const f = createRetryingFetch({
      maxRetries: 0,
      adaptiveThrottle: throttle,
      random: mulberry32(19),
      sleep: instant,
    });
    let local = 0;
    const N = 400;
    for (let i = 0; i < N; i++) {
      clock.advance(100); // 40 s in all: inside the 120 s window
      try {
        await (await f(url)).arrayBuffer();
      } catch (e) {
        expect(e).toBeInstanceOf(OverloadError);
        expect((e as OverloadError).code).toBe('SLUICE_ERR_OVERLOAD_THROTTLED');
        local++;
      }
    }
    // p = (requests − 2·0)/(requests + 1) → capped at 0.9: about 10 % get through.
    expect(seen.count + local).toBe(N);
    expect(seen.count).toBeLessThan(0.15 * N);
    expect(seen.count).toBeGreaterThan(0.05 * N);
    expect(throttle.rejectProbability()).toBeCloseTo(0.9);

    // Recovery: the few sent requests succeed, so accepts grow, and the refusals slide out
    // of the window: p ≈ 2·p_before − 1 per window's worth of traffic, so it falls
    // faster as it falls; within two windows (240 s) the client sends everything again.
    status = 200;
    const before = seen.count;
    for (let i = 0; i < 2400; i++) {
      clock.advance(100);
      await f(url).then(
        (r) => r.arrayBuffer(),
        () => undefined,
      );
    }
    expect(throttle.rejectProbability()).toBe(0);
    expect(seen.count).toBeGreaterThan(before);
    const recovered = seen.count;
    for (let i = 0; i < 200; i++) {
      clock.advance(100);
      await (await f(url)).arrayBuffer();
    }
    expect(seen.count - recovered).toBe(200);
  });

  it('with everything failing, the retry budget keeps retries to 10 % of first attempts (maxRetries 3 alone would send 4x)', async () => {
    const { url, seen } = await backend(() => 503);
    const clock = new ManualClock(0);
    const f = createRetryingFetch({
      maxRetries: 3,
      retryBudget: { ratio: 0.1, minRetries: 2, windowMs: 10_000 },
      nowMs: () => clock.nowMs(),
      random: () => 0,
      sleep: instant,
    });
    for (let i = 0; i < 100; i++) {
      clock.advance(10); // 1 s in all, inside one 10 s window
      expect((await f(url)).status).toBe(503);
    }
    // Retries allowed while retries < max(2, 0.1 × first attempts so far).
    expect(seen.count - 100).toBeLessThanOrEqual(10);
    expect(seen.count - 100).toBeGreaterThanOrEqual(9);
  });

  it('bad throttle or budget options are refused with the option named', () => {
    expect(() => createRetryingFetch({ adaptiveThrottle: { k: 0.5 } })).toThrow(
      'adaptive throttle: k must be in [1, ∞), got 0.5',
    );
    expect(() => createRetryingFetch({ retryBudget: { ratio: 2 } })).toThrow(
      'retry budget: ratio must be in [0, 1], got 2',
    );
  });
});
