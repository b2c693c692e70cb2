import type { StoreError } from '../../core/errors.js';

/** The Lua scripts a RedisStore calls, as `RedisCallObserver` names them. */
export type RedisScriptName = 'applyBatches' | 'refundBatch' | 'settleBatch';

/**
 * Told about every call a RedisStore makes to Redis (`RedisStoreOptions.observer`;
 * `RedisMetrics` is the Prometheus one). `shard` is the node that serves the call's
 * keys, `host:port` (the slot's primary on a Cluster, as ioredis last learned it;
 * `unknown` before it knows the slot map).
 */
export interface RedisCallObserver {
  /**
   * A script call was answered or failed after `durationMs` on the wire (from sending
   * to the reply; no wait for the connection). `error` is set when it failed.
   */
  scriptCall(script: RedisScriptName, shard: string, durationMs: number, error?: StoreError): void;
  /** A call failed before it was sent: not connected, or `maxInFlight` calls waiting. */
  notSent(shard: string, error: StoreError): void;
}
