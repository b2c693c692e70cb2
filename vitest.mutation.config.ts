import { configDefaults, defineConfig } from 'vitest/config';

/**
 * The tests `npm run mutation` runs against each mutant: the fast unit and property tests
 * of the mutated modules (src/algorithms, src/stores/batch.ts and key.ts, src/limiter).
 * The `*.redis.test.ts` and `*.cluster.test.ts` suites are left out: they take minutes
 * per run, and what they add over these (the Lua scripts) is not mutated.
 */
export default defineConfig({
  test: {
    include: [
      'test/algorithms/**/*.test.ts',
      'test/stores/key*.test.ts',
      'test/stores/batch*.test.ts',
      'test/stores/memory/**/*.test.ts',
      'test/limiter/**/*.test.ts',
    ],
    exclude: [...configDefaults.exclude, '**/*.redis.test.ts', '**/*.cluster.test.ts'],
    testTimeout: 30_000,
    setupFiles: ['test/support/property-setup.ts'],
  },
});
