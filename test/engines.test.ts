/**
 * Every package the lockfile installs runs on the Node versions Sluice names, so `npm ci`
 * prints no EBADENGINE warning there: the README's Node for development (the test and
 * build tools included), package.json's `engines` for what users install.
 */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

const semver = createRequire(import.meta.url)('semver') as {
  satisfies(version: string, range: string): boolean;
  minVersion(range: string): { version: string } | null;
};
const root = join(import.meta.dirname, '..');
const lock = JSON.parse(readFileSync(join(root, 'package-lock.json'), 'utf8')) as {
  packages: Record<string, { version?: string; dev?: boolean; engines?: { node?: string } }>;
};

/** Lockfile entries whose `engines.node` excludes `nodeVersion`, as `path@version wants range`. */
function refusing(nodeVersion: string, include: (p: { dev?: boolean }) => boolean): string[] {
  return Object.entries(lock.packages)
    .filter(([path, p]) => path !== '' && include(p) && p.engines?.node !== undefined)
    .filter(([, p]) => !semver.satisfies(nodeVersion, p.engines!.node!))
    .map(([path, p]) => `${path}@${p.version} wants ${p.engines!.node}`);
}

describe('engines', () => {
  it('installs nothing that refuses the Node version the README names for development', () => {
    const readme = readFileSync(join(root, 'README.md'), 'utf8');
    const named = /^## Two commands \(Node (\d+\.\d+) or later, /m.exec(readme)?.[1];
    expect(named).toBe('20.19');
    expect(refusing(`${named}.0`, () => true)).toEqual([]);
  });

  it("installs nothing at run time that refuses the oldest Node package.json's engines admit", () => {
    const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as {
      engines: { node: string };
    };
    const oldest = semver.minVersion(pkg.engines.node)!.version;
    // 20.6: the OpenTelemetry 2.x packages (tracing) need it.
    expect(oldest).toBe('20.6.0');
    expect(refusing(oldest, (p) => p.dev !== true)).toEqual([]);
  });
});
