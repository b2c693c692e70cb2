/**
 * The service on a real redis-server reached through a FaultProxy, for the tests that make
 * the store fail under the running service (frozen, reset, refused, killed).
 */
import type { RunningService, ServeOptions } from '../../src/service/main.js';
import { FaultProxy } from './fault-proxy.js';
import { startLoopbackService } from './loopback-service.js';
import { RedisServer } from './redis-server.js';

export interface ServiceBehindProxy {
  readonly redis: RedisServer;
  readonly proxy: FaultProxy;
  readonly svc: RunningService;
}

/**
 * Starts a redis-server, a FaultProxy in front of it, and {@link startLoopbackService}
 * with `redis` set to the proxy; `options` add to these. The caller stops all three.
 */
export async function startServiceBehindProxy(
  options: ServeOptions = {},
): Promise<ServiceBehindProxy> {
  const redis = await RedisServer.start();
  let proxy: FaultProxy | undefined;
  try {
    proxy = await FaultProxy.start(redis);
    const svc = await startLoopbackService({
      redis: { type: 'single', url: proxy.url },
      ...options,
    });
    return { redis, proxy, svc };
  } catch (error) {
    // Nothing was returned for the caller to stop.
    await proxy?.close();
    await redis.stop();
    throw error;
  }
}
