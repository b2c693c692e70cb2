import { configDefaults, defineConfig } from 'vitest/config';

// Suites whose assertions count admissions per wall-clock window across several real
// processes (controllers, agents, services, redis-server). They run after the rest, one
// file at a time, so that no other test file competes with them for the two cores.
const windowed = [
  'test/quota/**/*.redis.test.ts',
  'test/local/**/*.redis.test.ts',
  'test/limiter/**/*.redis.test.ts',
  'test/service/**/*.redis.test.ts',
  'test/overload/**/*.test.ts',
];

const workers = Number(process.env.SLUICE_TEST_WORKERS ?? 2);
if (!Number.isInteger(workers) || workers < 1) {
  throw new Error(
    `SLUICE_TEST_WORKERS must be a positive integer, got "${process.env.SLUICE_TEST_WORKERS}"`,
  );
}

export default defineConfig({
  test: {
    // Stryker's sandboxes hold copies of the tests.
    exclude: [...configDefaults.exclude, '.stryker-tmp/**'],
    testTimeout: 30_000,
    hookTimeout: 120_000,
    pool: 'forks',
    // One fast-check seed for every property (test/support/property-seed.ts).
    setupFiles: ['test/support/property-setup.ts'],
    projects: [
      {
        extends: true,
        test: {
          name: 'parallel',
          include: ['test/**/*.test.ts'],
          exclude: [...configDefaults.exclude, '.stryker-tmp/**', ...windowed],
          maxWorkers: workers,
          sequence: { groupOrder: 0 },
        },
      },
      {
        extends: true,
        test: {
          name: 'windowed',
          include: windowed,
          maxWorkers: 1,
          sequence: { groupOrder: 1 },
        },
      },
    ],
  },
});
