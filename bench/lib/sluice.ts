/**
 * Sluice as users run it: the compiled package (dist/), not the TypeScript sources through
 * tsx (whose transform costs the in-process hot path about a quarter of its speed, and
 * which the peer, plain JavaScript, does not pay). `npm run build` runs first unless
 * `--no-build` is given.
 */
import { execSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

export interface SluiceModules {
  readonly main: typeof import('../../src/index.js');
  readonly redis: typeof import('../../src/redis.js');
}

export async function loadSluice(build: boolean): Promise<SluiceModules> {
  const root = path.join(import.meta.dirname, '..', '..');
  const entry = (name: string): string => path.join(root, 'dist', name);
  if (build || !fs.existsSync(entry('index.js'))) {
    execSync('npm run build', { cwd: root, stdio: ['ignore', 'ignore', 'inherit'] });
  }
  const main = (await import(pathToFileURL(entry('index.js')).href)) as SluiceModules['main'];
  const redis = (await import(pathToFileURL(entry('redis.js')).href)) as SluiceModules['redis'];
  return { main, redis };
}
