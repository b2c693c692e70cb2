/**
 * startService() in this process on ephemeral loopback ports (HTTP and gRPC), for the
 * tests that run the real service (its servers and the store it builds) without spawning
 * the CLI: test/support/sluice-serve.ts spawns it.
 */
import { join } from 'node:path';
import { pino } from 'pino';
import { ManualClock } from '../../src/core/clock.js';
import { startService, type RunningService, type ServeOptions } from '../../src/service/main.js';

const root = join(import.meta.dirname, '../..');

/** The configs `npm start` serves: examples/envoy and examples/policies.yaml. */
export const EXAMPLE_CONFIGS = {
  envoyConfig: join(root, 'examples/envoy'),
  policiesFile: join(root, 'examples/policies.yaml'),
} as const satisfies ServeOptions;

/**
 * A clock standing still at 1,700,000,000 s (20 s into its minute, 800 s into its hour):
 * no refill and no window rollover between calls unless a test moves it.
 */
export function stillClock(): ManualClock {
  return new ManualClock(1_700_000_000_000);
}

/**
 * Starts the service on 127.0.0.1 with ports chosen by the kernel (read them from
 * `httpPort` and `grpcPort`) and a silent logger; `options` add to or override these.
 */
export function startLoopbackService(options: ServeOptions = {}): Promise<RunningService> {
  return startService({
    host: '127.0.0.1',
    grpcHost: '127.0.0.1',
    port: 0,
    grpcPort: 0,
    logger: pino({ level: 'silent' }),
    ...options,
  });
}

/**
 * {@link startLoopbackService} with the example configs on the memory store and a
 * {@link stillClock}; `options` add to or override these.
 */
export function startExampleService(options: ServeOptions = {}): Promise<RunningService> {
  return startLoopbackService({ ...EXAMPLE_CONFIGS, clock: stillClock(), ...options });
}
