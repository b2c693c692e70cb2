/**
 * Self-test for the cluster harness (test/support/redis-cluster.ts): a real 3 + 3 cluster on
 * loopback, writes through ioredis's Cluster client, and one failover.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isAlive } from '../support/redis-binary.js';
import { RedisCluster } from '../support/redis-cluster.js';

describe('RedisCluster (3 primaries + 3 replicas)', () => {
  let cluster: RedisCluster;

  beforeAll(async () => {
    cluster = await RedisCluster.start();
    console.info(`redis cluster of ${cluster.nodes.length} nodes ready in ${cluster.startupMs} ms`);
  });

  afterAll(async () => {
    await cluster.stop();
    for (const node of cluster.nodes) {
      expect(node.running).toBe(false);
      expect(isAlive(node.pid)).toBe(false);
    }
  });

  it('has 3 primaries and 3 replicas owning all 16384 slots', async () => {
    expect(cluster.nodes).toHaveLength(6);
    expect(cluster.startupNodes).toHaveLength(6);
    expect(await cluster.primaries()).toHaveLength(3);
    expect(await cluster.replicas()).toHaveLength(3);
    const info = await cluster.nodes[0]!.client().cluster('INFO');
    expect(info).toContain('cluster_state:ok');
    expect(info).toContain('cluster_slots_assigned:16384');
  });

  it('spreads 100 keys written through the Cluster client over every primary', async () => {
    const client = cluster.client();
    for (let i = 0; i < 100; i += 1) await client.set(`key:${i}`, String(i));
    expect(await client.get('key:42')).toBe('42');

    const primaries = await cluster.primaries();
    const sizes = await Promise.all(primaries.map((node) => node.client().dbsize()));
    expect(sizes.reduce((a, b) => a + b, 0)).toBe(100);
    for (const size of sizes) expect(size).toBeGreaterThan(0);

    // slotOfKey/nodeForSlot agree with where the key actually landed.
    const slot = await cluster.slotOfKey('key:7');
    expect(slot).toBe(await client.cluster('KEYSLOT', 'key:7'));
    const owner = await cluster.nodeForSlot(slot);
    expect(await owner.client().get('key:7')).toBe('7');
  });

  it('fails over when a primary is killed, and the old primary rejoins as a replica', async () => {
    const client = cluster.client();
    const slot = await cluster.slotOfKey('failover:key');
    const oldPrimary = await cluster.nodeForSlot(slot);
    await client.set('failover:key', 'before');
    // Make sure the write reached the replica before the crash.
    expect(await oldPrimary.client().wait(1, 5000)).toBe(1);

    await oldPrimary.kill();
    expect(isAlive(oldPrimary.pid)).toBe(false);
    const newPrimary = await cluster.waitForFailover(oldPrimary);
    expect(newPrimary).not.toBe(oldPrimary);
    expect(await cluster.nodeForSlot(slot)).toBe(newPrimary);
    expect(await client.get('failover:key')).toBe('before');
    await client.set('failover:key', 'after');

    await oldPrimary.restart();
    await cluster.waitForHealthy();
    expect(await cluster.replicas()).toContain(oldPrimary);
    expect(await cluster.primaries()).toHaveLength(3);
    expect(await client.get('failover:key')).toBe('after');
  }, 60_000);
});
