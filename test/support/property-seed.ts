/**
 * The seed of fast-check property runs. `npm test` runs one fixed seed everywhere, so a
 * red run in CI is the same run on every machine and a mutant the suite catches is caught
 * every time. `SLUICE_PROPERTY_SEED=random` explores a new seed per test file (printed at
 * the start); `SLUICE_PROPERTY_SEED=<integer>` replays one. fast-check's failure message
 * prints the `seed` and the `path` of the counterexample; `{ seed, path }` replays exactly
 * that case.
 */
export const FIXED_PROPERTY_SEED = 20_261_202;

/** fast-check `seed` for this run (see the file comment). */
export function propertySeed(env: NodeJS.ProcessEnv = process.env): number {
  const given = env['SLUICE_PROPERTY_SEED'];
  if (given === undefined || given === '') return FIXED_PROPERTY_SEED;
  if (given === 'random') return randomSeed;
  const seed = Number(given);
  if (!Number.isSafeInteger(seed)) {
    throw new Error(
      `SLUICE_PROPERTY_SEED must be an integer or "random", got ${JSON.stringify(given)}`,
    );
  }
  return seed | 0;
}

// One random seed per test file (module instance), so every property of a file and its
// printed seed agree.
const randomSeed = (Math.random() * 0x1_0000_0000) | 0;
