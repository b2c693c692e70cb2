/**
 * The seed of a fast-check property run: fixed in CI (`process.env.CI`), so a red run
 * there is the same run on every machine; random elsewhere, so local runs keep exploring.
 * `SLUICE_PROPERTY_SEED` sets it anywhere, to replay a failure: fast-check's failure
 * message prints the `seed` and the `path` of the counterexample, and
 * `{ ...propertyRun(), path }` replays exactly that case.
 */
export const CI_PROPERTY_SEED = 20_261_202;

/** fast-check `seed` for this run (see the file comment). */
export function propertySeed(env: NodeJS.ProcessEnv = process.env): number {
  const given = env['SLUICE_PROPERTY_SEED'];
  if (given !== undefined && given !== '') {
    const seed = Number(given);
    if (!Number.isSafeInteger(seed)) {
      throw new Error(`SLUICE_PROPERTY_SEED must be an integer, got ${JSON.stringify(given)}`);
    }
    return seed | 0;
  }
  if (env['CI'] !== undefined && env['CI'] !== '' && env['CI'] !== 'false') return CI_PROPERTY_SEED;
  return (Math.random() * 0x1_0000_0000) | 0;
}
