/**
 * Sluice as users run it: the compiled package (dist/), not the TypeScript sources through
 * tsx (whose transform costs the in-process hot path about a quarter of its speed, and
 * which the peer, plain JavaScript, does not pay). `npm run build` runs first unless
 * `--no-build` is given. Another checkout's build (`--before <dir>`, a baseline) loads the
 * same way from its own dist/.
 */
import { execSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

export interface SluiceModules {
  readonly main: typeof import('../../src/index.js');
  readonly redis: typeof import('../../src/redis.js');
}

/** This checkout. */
export const SLUICE_ROOT = path.join(import.meta.dirname, '..', '..');

/** Sluice's compiled modules from `root`'s dist/, built first when `build` (or missing). */
export async function loadSluice(build: boolean, root = SLUICE_ROOT): Promise<SluiceModules> {
  const entry = (name: string): string => path.join(root, 'dist', name);
  if (build || !fs.existsSync(entry('index.js'))) {
    execSync('npm run build', { cwd: root, stdio: ['ignore', 'ignore', 'inherit'] });
  }
  const main = (await import(pathToFileURL(entry('index.js')).href)) as SluiceModules['main'];
  const redis = (await import(pathToFileURL(entry('redis.js')).href)) as SluiceModules['redis'];
  return { main, redis };
}
