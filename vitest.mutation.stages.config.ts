import { configDefaults, defineConfig } from 'vitest/config';

/**
 * The tests `npm run mutation:stages` runs against each mutant of the later stages
 * (src/local, src/quota, src/overload): their in-process unit and property suites, the
 * limiter, HTTP, metrics and service suites that drive the stages through the public API,
 * and the HTTP and metrics suites that drive the overload controls through real servers on
 * loopback. The `*.redis.test.ts` suites are left out: each starts redis-server processes
 * and takes tens of seconds, which a per-mutant run cannot afford.
 */
export default defineConfig({
  test: {
    include: [
      'test/local/**/*.test.ts',
      'test/quota/**/*.test.ts',
      'test/overload/**/*.test.ts',
      // The limiter, HTTP and service suites that drive the stages through the public API
      // (remaining/granted on the batch and lease paths, per-second limiter, stage metrics).
      'test/limiter/**/*.test.ts',
      'test/http/stage-headers.test.ts',
      'test/metrics/stage-units.service.test.ts',
      'test/service/lease-agents.test.ts',
      'test/service/per-second-limiter.test.ts',
      'test/http/overload-*.test.ts',
      'test/http/retry-client-overload.test.ts',
      'test/metrics/overload-metrics.test.ts',
      'test/config/overload-config.test.ts',
    ],
    exclude: [...configDefaults.exclude, '**/*.redis.test.ts', '**/*.cluster.test.ts'],
    testTimeout: 30_000,
    setupFiles: ['test/support/property-setup.ts'],
  },
});
