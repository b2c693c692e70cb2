/**
 * The descriptor limits and HTTP timeouts of `sluice serve` from its environment
 * variables and flags, through the spawned CLI (the built dist/; `npm run build`
 * first): a request past a configured limit is refused naming it, and a client that
 * never finishes its headers gets 408 after the configured headers timeout.
 */
import { connect } from 'node:net';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { type Serve, spawnServe, stopServe } from '../support/sluice-serve.js';

const config = join(import.meta.dirname, '../../examples/envoy');
const spawned: Serve[] = [];

afterAll(async () => {
  await Promise.all(spawned.map((s) => stopServe(s)));
});

async function serve(args: readonly string[], env: NodeJS.ProcessEnv = {}): Promise<Serve> {
  const s = await spawnServe(['--config', config, ...args], env);
  spawned.push(s);
  return s;
}

/** POST /json with one descriptor per value (key `k`); status and body. */
async function json(s: Serve, values: readonly string[]): Promise<[number, string]> {
  const r = await fetch(`http://127.0.0.1:${s.httpPort}/json`, {
    method: 'POST',
    body: JSON.stringify({
      domain: 'any',
      descriptors: values.map((value) => ({ entries: [{ key: 'k', value }] })),
    }),
  });
  return [r.status, await r.text()];
}

/** Sends an unfinished request head and resolves with the first line the server answers. */
function unfinishedHeaders(port: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1', () => {
      socket.write('POST /json HTTP/1.1\r\nHost: x\r\n'); // the blank line never comes
    });
    let got = '';
    socket.on('data', (b: Buffer) => {
      got += b.toString();
      if (got.includes('\r\n')) {
        socket.destroy();
        resolve(got.slice(0, got.indexOf('\r\n')));
      }
    });
    socket.on('error', reject);
    socket.on('close', () => resolve(got));
  });
}

describe('sluice serve: descriptor limits and HTTP timeouts from variables and flags', () => {
  it('SLUICE_MAX_DESCRIPTOR_VALUE_LENGTH and --max-descriptors bound /json requests', async () => {
    const s = await serve(['--max-descriptors', '2'], { SLUICE_MAX_DESCRIPTOR_VALUE_LENGTH: '8' });
    expect((await json(s, ['12345678', 'b']))[0]).toBe(200);
    const [longStatus, longBody] = await json(s, ['123456789']);
    expect(longStatus).toBe(400);
    expect(longBody).toContain('value is 9 characters long; the limit is 8');
    const [manyStatus, manyBody] = await json(s, ['a', 'b', 'c']);
    expect(manyStatus).toBe(400);
    expect(manyBody).toContain('the request has 3 descriptors; the limit is 2');
  });

  it('--max-descriptor-entries and SLUICE_MAX_DESCRIPTOR_KEY_LENGTH bound them too', async () => {
    const s = await serve(['--max-descriptor-entries', '1'], {
      SLUICE_MAX_DESCRIPTOR_KEY_LENGTH: '3',
    });
    const ask = (entries: { key: string; value: string }[]) =>
      fetch(`http://127.0.0.1:${s.httpPort}/json`, {
        method: 'POST',
        body: JSON.stringify({ domain: 'any', descriptors: [{ entries }] }),
      }).then(async (r) => [r.status, await r.text()] as const);
    expect((await ask([{ key: 'abc', value: 'v' }]))[0]).toBe(200);
    const [twoStatus, twoBody] = await ask([
      { key: 'a', value: 'v' },
      { key: 'b', value: 'v' },
    ]);
    expect([twoStatus, twoBody]).toEqual([
      400,
      expect.stringContaining('has 2 entries; the limit is 1'),
    ]);
    const [keyStatus, keyBody] = await ask([{ key: 'abcd', value: 'v' }]);
    expect([keyStatus, keyBody]).toEqual([
      400,
      expect.stringContaining('key is 4 characters long; the limit is 3'),
    ]);
  });

  it('SLUICE_HTTP_HEADERS_TIMEOUT_MS: unfinished headers get 408 (the default waits 10 s)', async () => {
    const s = await serve(['--http-request-timeout', '5000'], {
      SLUICE_HTTP_HEADERS_TIMEOUT_MS: '300',
      SLUICE_HTTP_KEEP_ALIVE_TIMEOUT_MS: '1000',
    });
    const t0 = performance.now();
    expect(await unfinishedHeaders(s.httpPort)).toBe('HTTP/1.1 408 Request Timeout');
    expect(performance.now() - t0).toBeLessThan(9_000);
  });
});
