/**
 * Heap bytes per bucket held by MemoryStore, per algorithm (run with
 * `node --expose-gc --import tsx bench/memory-store-footprint.ts`). Keys look like real
 * ones (`{tenant=tenant-123456}:payments-tenant`); the figure includes the key string.
 */
import { ALGORITHMS } from '../src/algorithms/index.js';
import { parsePolicies } from '../src/config/policies.js';
import type { AlgorithmKind } from '../src/algorithms/index.js';
import { MemoryStore } from '../src/stores/memory/memory-store.js';

const N = 200_000;
const params: Record<AlgorithmKind, Record<string, unknown>> = {
  'token-bucket': { rate: 100, burst: 20 },
  gcra: { rate: 100, burst: 20 },
  'leaky-bucket': { rate: 100, capacity: 20 },
  'fixed-window': { limit: 100, window: '1m' },
  'sliding-window-counter': { limit: 100, window: '1m' },
  'sliding-log': { limit: 100, window: '1m' },
};
const gc = (globalThis as { gc?: () => void }).gc;
if (!gc) throw new Error('run with node --expose-gc');

console.log('| algorithm | bytes per bucket (one admitted request) |\n|---|---:|');
for (const kind of Object.keys(params) as AlgorithmKind[]) {
  const [policy] = parsePolicies([
    { name: 'payments-tenant', match: ['tenant'], algorithm: kind, ...params[kind] },
  ]).policies;
  const store = new MemoryStore({ maxKeys: N + 1 });
  const algorithm = ALGORITHMS[kind];
  gc();
  const before = process.memoryUsage().heapUsed;
  for (let i = 0; i < N; i++) {
    const key = `{tenant=tenant-${100_000 + i}}:payments-tenant`;
    await store.apply([{ key, algorithm, params: policy!.params, cost: 1, enforce: true }], {
      nowMs: 1_000,
    });
  }
  gc();
  const bytes = (process.memoryUsage().heapUsed - before) / N;
  console.log(`| ${kind} | ${Math.round(bytes)} |`);
  await store.close();
}
