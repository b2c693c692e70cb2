/**
 * One side of one scenario in a Node process of its own: the pinned mode of bench/run.ts
 * starts one per side (`taskset` to one core), so each side's CPU is its own process's.
 *
 * Arguments: `--scenario <id> --side <name> [--redis-port <n>] [--before <dir>]`.
 * Requests (one line each, see serve-child.ts): `drive <ms>` runs the side closed-loop for
 * that long and answers `result <DriveResult as JSON>`; `close` closes it, answers
 * `closed` and exits.
 */
import { drive } from './driver.js';
import { keyRing } from './rng.js';
import { answerParent } from './serve-child.js';
import {
  allScenarios,
  driveOptions,
  KEYS,
  makeSide,
  SEED,
  type SideContext,
  type SideName,
} from './scenarios.js';
import { loadSluice } from './sluice.js';

function arg(name: string): string | undefined {
  const i = process.argv.indexOf(name);
  return i >= 0 ? process.argv[i + 1] : undefined;
}

const id = arg('--scenario');
const scenario = allScenarios().find((s) => s.id === id);
if (scenario === undefined) throw new Error(`side-child: no scenario ${String(id)}`);
const beforeDir = arg('--before');
const port = arg('--redis-port');
const ctx: SideContext = {
  ring: keyRing(scenario.dist, KEYS, SEED),
  sluice: await loadSluice(false),
  ...(beforeDir === undefined ? {} : { before: await loadSluice(false, beforeDir) }),
  ...(port === undefined ? {} : { redisPort: Number(port) }),
};
const side = await makeSide(arg('--side') as SideName, scenario, ctx);

answerParent(async (request) => {
  const [verb, value] = request.split(' ');
  if (verb === 'drive') {
    const r = await drive(side.op, driveOptions(scenario, side, Number(value)));
    return `result ${JSON.stringify(r)}`;
  }
  if (verb === 'close') {
    await side.close();
    setImmediate(() => process.exit(0));
    return 'closed';
  }
  throw new Error(`unknown request ${JSON.stringify(request)}`);
});
