// The `sluice/redis` entry point.
export { RedisStore, type RedisStoreOptions } from './stores/redis/redis-store.js';
export type { ClusterNode, SentinelTarget } from './stores/redis/redis-store.js';
export type { CrossSlotStats, CrossSlotStrategy } from './stores/redis/cross-slot.js';
export type { HotKey } from './stores/redis/hot-keys.js';
export type { ReplicatedAckOptions, ReplicatedAckStats } from './stores/redis/replicated-ack.js';
export type { RedisCallObserver, RedisScriptName } from './stores/redis/call-observer.js';
export type { ScriptStats } from './stores/redis/script-stats.js';
