/**
 * Self-tests for the single-node and replica parts of the redis harness (test/support/).
 * They start real redis-server processes and fail if Redis cannot be found or installed.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../support/free-port.js';
import { ensureRedisBinaries, isAlive } from '../support/redis-binary.js';
import { RedisServer, startedRedisServers, stopAllRedisServers } from '../support/redis-server.js';
import { respCommand } from '../support/resp.js';
import { waitFor } from '../support/wait.js';

afterAll(async () => {
  await stopAllRedisServers();
  for (const server of startedRedisServers()) {
    expect(server.running).toBe(false);
    expect(isAlive(server.pid)).toBe(false);
  }
});

describe('ensureRedisBinaries', () => {
  it('finds redis-server and redis-cli and reads the version', async () => {
    const binaries = await ensureRedisBinaries();
    expect(binaries.server).toMatch(/\/redis-server$/);
    expect(binaries.cli).toMatch(/\/redis-cli$/);
    expect(binaries.version).toMatch(/^\d+\.\d+\.\d+/);
    // Cached: the second call is the same object.
    expect(await ensureRedisBinaries()).toBe(binaries);
  });
});

describe('freePort', () => {
  it('returns a usable loopback port', async () => {
    const port = await freePort();
    expect(port).toBeGreaterThan(0);
    expect(port).toBeLessThanOrEqual(65535);
  });
});

describe('RedisServer (standalone)', () => {
  let server: RedisServer;

  beforeAll(async () => {
    server = await RedisServer.start();
  });

  afterAll(async () => {
    await server.stop();
  });

  it('listens on 127.0.0.1 with persistence off', async () => {
    expect(server.host).toBe('127.0.0.1');
    expect(server.url).toBe(`redis://127.0.0.1:${server.port}`);
    expect(server.running).toBe(true);
    expect(isAlive(server.pid)).toBe(true);
    const client = server.client();
    expect(await client.config('GET', 'bind')).toEqual(['bind', '127.0.0.1']);
    expect(await client.config('GET', 'save')).toEqual(['save', '']);
    expect(await client.config('GET', 'appendonly')).toEqual(['appendonly', 'no']);
  });

  it('SETs and GETs through its client', async () => {
    const client = server.client();
    expect(await client.set('greeting', 'hello')).toBe('OK');
    expect(await client.get('greeting')).toBe('hello');
  });

  it('kill() removes the process, restart() brings it back on the same port', async () => {
    const client = server.client();
    const { port } = server;
    const oldPid = server.pid;

    await server.kill();
    expect(server.running).toBe(false);
    expect(isAlive(oldPid)).toBe(false);
    expect(() => process.kill(oldPid, 0)).toThrow(expect.objectContaining({ code: 'ESRCH' }));
    // Nothing listens any more (ioredis would queue a command, so ask with a raw connection).
    await expect(respCommand(server.host, port, ['PING'])).rejects.toThrow(/ECONNREFUSED/);

    await server.restart();
    expect(server.port).toBe(port);
    expect(server.pid).not.toBe(oldPid);
    expect(isAlive(server.pid)).toBe(true);
    // The same client reconnects; persistence is off, so the data is gone.
    await waitFor(async () => ((await client.ping()) === 'PONG' ? true : undefined), {
      what: 'the client to reconnect',
      timeoutMs: 10_000,
    });
    expect(await client.get('greeting')).toBeNull();
  });

  it('stop() terminates gracefully and can be restarted', async () => {
    const pid = server.pid;
    await server.stop();
    expect(isAlive(pid)).toBe(false);
    await server.stop(); // idempotent
    await server.restart();
    expect(await server.client().ping()).toBe('PONG');
  });
});

describe('RedisServer (primary + replica)', () => {
  let primary: RedisServer;
  let replica: RedisServer;

  beforeAll(async () => {
    primary = await RedisServer.start();
    replica = await RedisServer.start({ replicaOf: primary });
  });

  afterAll(async () => {
    await replica.stop();
    await primary.stop();
  });

  it('links the replica to the primary', async () => {
    const info = await replica.info('replication');
    expect(info.get('role')).toBe('slave');
    expect(info.get('master_port')).toBe(String(primary.port));
    expect(info.get('master_link_status')).toBe('up');
  });

  it('replicates a write', async () => {
    await primary.client().set('replicated', 'yes');
    const reader = replica.client();
    const value = await waitFor(async () => (await reader.get('replicated')) ?? undefined, {
      what: 'the write to reach the replica',
      timeoutMs: 10_000,
    });
    expect(value).toBe('yes');
    await expect(reader.set('x', '1')).rejects.toThrow(/READONLY/);
  });
});

describe('RedisServer start failures', () => {
  it('rejects with the server log when redis-server refuses to start', async () => {
    const before = startedRedisServers().length;
    await expect(
      RedisServer.start({ extraArgs: ['--no-such-directive', 'yes'], startTimeoutMs: 10_000 }),
    ).rejects.toThrow(/exited with code 1 before answering PING[\s\S]*no-such-directive/i);
    // The failed server is not left in the registry or running.
    expect(startedRedisServers().length).toBe(before);
  });
});
