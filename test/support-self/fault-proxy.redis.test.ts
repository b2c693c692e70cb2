/**
 * Self-tests for the fault-injection proxy (test/support/fault-proxy.ts): each fault is proven
 * against a real redis-server with a real ioredis client connected through the proxy, and a
 * direct client (not through the proxy) as the source of truth about what Redis applied.
 */
import { performance } from 'node:perf_hooks';
import { Redis, type RedisOptions } from 'ioredis';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { closeAllFaultProxies, FaultProxy } from '../support/fault-proxy.js';
import { RedisServer, stopAllRedisServers } from '../support/redis-server.js';
import { respCommand } from '../support/resp.js';
import { waitFor } from '../support/wait.js';

/**
 * ioredis settings for fault tests: fail fast instead of queueing or resending, reconnect
 * quickly, and time commands out after 200 ms.
 */
const FAULT_CLIENT_OPTIONS = {
  maxRetriesPerRequest: 0,
  enableOfflineQueue: false,
  autoResendUnfulfilledCommands: false,
  retryStrategy: () => 50,
  commandTimeout: 200,
  connectTimeout: 1000,
} satisfies RedisOptions;

let primary: RedisServer;
let secondary: RedisServer;
let proxy: FaultProxy;
const proxyClients: Redis[] = [];

beforeAll(async () => {
  [primary, secondary] = await Promise.all([RedisServer.start(), RedisServer.start()]);
});

afterAll(async () => {
  await closeAllFaultProxies();
  await stopAllRedisServers();
});

beforeEach(async () => {
  proxy = await FaultProxy.start(primary);
  await Promise.all([primary.client().flushall(), secondary.client().flushall()]);
});

afterEach(async () => {
  for (const client of proxyClients.splice(0)) client.disconnect();
  await proxy.close();
});

/**
 * Client options without `undefined` in `replyMapping`: with exactOptionalPropertyTypes, ioredis
 * 6's constructor rejects plain `RedisOptions` (whose `replyMapping` admits `undefined`).
 */
type ClientOptions = RedisOptions & { replyMapping?: 'legacy' };

/** An ioredis client connected through `proxy`; collects its 'error' events. */
function clientThroughProxy(
  overrides: ClientOptions = {},
): Redis & { errors: NodeJS.ErrnoException[] } {
  const client = new Redis({
    host: proxy.host,
    port: proxy.port,
    lazyConnect: false,
    ...FAULT_CLIENT_OPTIONS,
    ...overrides,
  });
  const errors: NodeJS.ErrnoException[] = [];
  client.on('error', (error: NodeJS.ErrnoException) => errors.push(error));
  proxyClients.push(client);
  return Object.assign(client, { errors });
}

/** Resolves once `client` answers PING (it may have to reconnect first). */
async function untilWorking(client: Redis, what: string): Promise<void> {
  await waitFor(async () => ((await client.ping()) === 'PONG' ? true : undefined), {
    what,
    timeoutMs: 5000,
    intervalMs: 25,
  });
}

async function ready(client: Redis): Promise<void> {
  await untilWorking(client, 'the proxied client to become ready');
}

describe('FaultProxy', () => {
  it('starts on a free loopback port and reports its address', () => {
    expect(proxy.host).toBe('127.0.0.1');
    expect(proxy.port).toBeGreaterThan(0);
    expect(proxy.url).toBe(`redis://127.0.0.1:${proxy.port}`);
    expect(proxy.target).toEqual({ host: primary.host, port: primary.port });
  });

  it('passes SET/GET through and counts bytes', async () => {
    const client = clientThroughProxy();
    await ready(client);
    expect(await client.set('greeting', 'hello')).toBe('OK');
    expect(await client.get('greeting')).toBe('hello');
    expect(await primary.client().get('greeting')).toBe('hello');
    const stats = proxy.stats();
    expect(stats.accepted).toBe(1);
    expect(stats.active).toBe(1);
    expect(stats.bytesUp).toBeGreaterThan(0);
    expect(stats.bytesDown).toBeGreaterThan(0);
    expect(stats.bytesDropped).toBe(0);
  });

  it('setLatency delays each direction and keeps order', async () => {
    const client = clientThroughProxy({ commandTimeout: 2000 });
    await ready(client);
    await client.set('k', 'v');

    proxy.setLatency(100);
    const started = performance.now();
    expect(await client.get('k')).toBe('v');
    const elapsed = performance.now() - started;
    // 100 ms on the way up and 100 ms on the way down.
    expect(elapsed).toBeGreaterThanOrEqual(200);
    expect(proxy.stats().chunksDelayed).toBeGreaterThanOrEqual(2);

    // Lowering the latency never lets a later chunk overtake an earlier one: the GET sent with
    // no latency still reaches Redis after the SET sent with 100 ms.
    const delayedBefore = proxy.stats().chunksDelayed;
    const set = client.set('order', 'first');
    // The proxy holds the SET (counted when it arrives), so the GET travels in a chunk of
    // its own, sent after it.
    await waitFor(() => (proxy.stats().chunksDelayed > delayedBefore ? true : undefined), {
      what: 'the proxy to hold the SET',
      timeoutMs: 10_000,
      intervalMs: 1,
    });
    proxy.setLatency(0);
    const get = client.get('order');
    expect(await get).toBe('first');
    expect(await set).toBe('OK');

    // Heal clears a latency: no chunk is delayed any more (counted by the proxy, not timed).
    proxy.setLatency(100);
    proxy.heal();
    const delayed = proxy.stats().chunksDelayed;
    expect(await client.ping()).toBe('PONG');
    expect(proxy.stats().chunksDelayed).toBe(delayed);
  });

  it('blackhole upstream: the command never reaches Redis', async () => {
    const direct = primary.client();
    await direct.set('counter', '5');
    const client = clientThroughProxy();
    await ready(client);

    proxy.blackhole('upstream');
    await expect(client.incr('counter')).rejects.toThrow(/timed out/i);
    // The INCR's bytes were discarded, not held: no later delivery can change the counter.
    await waitFor(() => (proxy.stats().bytesDroppedUp > 0 ? true : undefined), {
      what: 'the proxy to drop the INCR bytes',
      timeoutMs: 5000,
      intervalMs: 10,
    });
    expect(await direct.get('counter')).toBe('5');
    const stats = proxy.stats();
    expect(stats.bytesDroppedUp).toBeGreaterThan(0);
    // No FIN/RST: the connection is still open, the client just waited.
    expect(stats.resets).toBe(0);
    expect(stats.active).toBe(1);
    expect(client.status).toBe('ready');

    // ioredis still waits for the lost INCR's reply, so its stream is out of step: heal and
    // reset to get a clean connection.
    proxy.heal();
    proxy.resetAll();
    await untilWorking(client, 'the client to reconnect after the blackhole');
    expect(await client.incr('counter')).toBe(6);
  });

  it('blackhole downstream: the command is applied but the reply never arrives', async () => {
    const direct = primary.client();
    await direct.set('counter', '5');
    const client = clientThroughProxy();
    await ready(client);

    proxy.blackhole('downstream');
    await expect(client.incr('counter')).rejects.toThrow(/timed out/i);
    expect(await direct.get('counter')).toBe('6');
    expect(proxy.stats().bytesDroppedDown).toBeGreaterThan(0);
    expect(proxy.stats().active).toBe(1);
    proxy.heal();
  });

  it('dropNextReply: the command is applied, the reply is lost, the connection is reset', async () => {
    const direct = primary.client();
    await direct.set('counter', '10');
    const client = clientThroughProxy();
    await ready(client);

    proxy.dropNextReply();
    await expect(client.incr('counter')).rejects.toThrow(
      /timed out|ECONNRESET|max retries|connection/i,
    );
    expect(await direct.get('counter')).toBe('11');
    const stats = proxy.stats();
    expect(stats.repliesDropped).toBe(1);
    expect(stats.resets).toBe(1);
    expect(stats.bytesDroppedDown).toBeGreaterThan(0);

    // One-shot: after reconnecting, replies flow again.
    await untilWorking(client, 'the client to reconnect after the dropped reply');
    expect(await client.incr('counter')).toBe(12);
    expect(proxy.stats().repliesDropped).toBe(1);
  });

  it('dropNextReply({ thenReset: false }): the reply is lost and the connection stays up', async () => {
    const direct = primary.client();
    await direct.set('counter', '10');
    const client = clientThroughProxy();
    await ready(client);

    proxy.dropNextReply({ thenReset: false });
    await expect(client.incr('counter')).rejects.toThrow(/timed out/i);
    expect(await direct.get('counter')).toBe('11');
    expect(proxy.stats()).toMatchObject({ repliesDropped: 1, resets: 0, active: 1 });
    // The RESP stream is now out of step for this client; a reset gives it a clean one.
    proxy.resetAll();
    await untilWorking(client, 'the client to reconnect');
    expect(await client.incr('counter')).toBe(12);
  });

  it('resetAll: the client sees a connection error, then reconnects after heal', async () => {
    const client = clientThroughProxy();
    await ready(client);

    // Refuse too, so that the client cannot reconnect until heal().
    proxy.refuse(true);
    proxy.resetAll();
    await waitFor(() => (client.errors.some((e) => e.code === 'ECONNRESET') ? true : undefined), {
      what: 'ECONNRESET on the proxied client',
      timeoutMs: 2000,
      intervalMs: 10,
    });
    expect(proxy.stats().resets).toBe(1);
    await expect(client.ping()).rejects.toThrow();

    proxy.heal();
    await untilWorking(client, 'the client to reconnect after heal');
    expect(proxy.stats().accepted).toBeGreaterThanOrEqual(2);
  });

  it('setTarget + resetAll: the client lands on the second server', async () => {
    await primary.client().set('where', 'primary');
    await secondary.client().set('where', 'secondary');
    const client = clientThroughProxy();
    await ready(client);
    expect(await client.get('where')).toBe('primary');

    proxy.setTarget(secondary);
    expect(proxy.target.port).toBe(secondary.port);
    // Existing connections stay where they were.
    expect(await client.get('where')).toBe('primary');

    proxy.resetAll();
    await waitFor(async () => ((await client.get('where')) === 'secondary' ? true : undefined), {
      what: 'the client to reconnect to the second server',
      timeoutMs: 5000,
      intervalMs: 25,
    });
    await client.incr('moved');
    expect(await secondary.client().get('moved')).toBe('1');
    expect(await primary.client().get('moved')).toBeNull();
  });

  it('refuse: new connections fail while on and succeed after', async () => {
    const existing = clientThroughProxy();
    await ready(existing);

    proxy.refuse(true);
    await expect(
      respCommand(proxy.host, proxy.port, ['PING'], { timeoutMs: 1000 }),
    ).rejects.toThrow(/ECONNRESET|closed before a complete reply/);
    const late = clientThroughProxy();
    // Wait for the refusal of the late client's connection itself, not for a stretch of time.
    await waitFor(
      (report) => {
        report(`refused=${proxy.stats().refused}`);
        return proxy.stats().refused >= 2 ? true : undefined;
      },
      { what: 'the proxy to refuse the late client', timeoutMs: 5000, intervalMs: 10 },
    );
    expect(late.status).not.toBe('ready');
    await expect(late.ping()).rejects.toThrow();
    expect(proxy.stats().refused).toBeGreaterThanOrEqual(2);
    // Existing connections are not affected.
    expect(await existing.ping()).toBe('PONG');

    proxy.refuse(false);
    expect(await respCommand(proxy.host, proxy.port, ['PING'])).toBe('PONG');
    await untilWorking(late, 'the late client to connect once refusal is off');
  });

  it('close() stops listening and drops every connection', async () => {
    const other = await FaultProxy.start(primary);
    const client = clientThroughProxy({ port: other.port });
    await ready(client);
    expect(other.stats().active).toBe(1);
    await other.close();
    await other.close(); // idempotent
    expect(other.stats().active).toBe(0);
    await expect(respCommand(other.host, other.port, ['PING'])).rejects.toThrow(/ECONNREFUSED/);
  });
});
