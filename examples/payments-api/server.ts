// npx tsx examples/payments-api/server.ts
// REDIS_URL=redis://127.0.0.1:6379 npx tsx examples/payments-api/server.ts
// PORT (default 3000) and HOST (default 127.0.0.1) choose where it listens.
import { Redis } from 'ioredis';
import { MemoryStore, type Store } from 'sluice';
import { RedisStore } from 'sluice/redis';
import { createPaymentsApp } from './app.js';

const redisUrl = process.env['REDIS_URL'];
let store: Store;
let redis: Redis | undefined;
if (redisUrl === undefined || redisUrl === '') {
  store = new MemoryStore();
} else {
  redis = new Redis(redisUrl, { lazyConnect: true });
  const redisStore = new RedisStore({ client: redis });
  await redisStore.ready();
  store = redisStore;
}

const { app } = createPaymentsApp({ store });
const host = process.env['HOST'] ?? '127.0.0.1';
const server = app.listen(Number(process.env['PORT'] ?? 3000), host, () => {
  const address = server.address();
  const port = typeof address === 'object' && address !== null ? address.port : '?';
  console.log(
    `payments-api listening on http://${host}:${port} (store: ${redis ? 'redis' : 'memory'})`,
  );
});

async function shutdown(): Promise<void> {
  server.close();
  server.closeAllConnections();
  await store.close();
  redis?.disconnect();
}
process.once('SIGINT', () => void shutdown());
process.once('SIGTERM', () => void shutdown());
