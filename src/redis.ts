// The `sluice/redis` entry point.
export { RedisStore, type RedisStoreOptions } from './stores/redis/redis-store.js';
