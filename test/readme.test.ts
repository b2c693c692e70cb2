import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { promisify } from 'node:util';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

const root = join(import.meta.dirname, '..');

describe('README', () => {
  it('shows examples/quickstart.ts verbatim (type-checked by `npm run typecheck`, run below)', () => {
    const readme = readFileSync(join(root, 'README.md'), 'utf8');
    const block = /```ts\n([\s\S]*?)```/.exec(readme)?.[1];
    expect(block).toBe(readFileSync(join(root, 'examples/quickstart.ts'), 'utf8'));
  });

  it('runs and prints what its comment says (imports the built package by name)', async () => {
    const tsx = join(root, 'node_modules/.bin/tsx');
    const { stdout } = await promisify(execFile)(tsx, ['examples/quickstart.ts'], { cwd: root });
    expect(stdout).toBe('true 15 0\n');
  });

  it('gives the two set-up commands, and .ci/run runs the test one', () => {
    const readme = readFileSync(join(root, 'README.md'), 'utf8');
    expect(readme).toContain('```sh\nnpm ci && npm start\n```');
    expect(readme).toContain('```sh\nnpm ci && npm test\n```');
    expect(readFileSync(join(root, '.ci/run'), 'utf8')).toMatch(/^npm ci && npm test$/m);
  });
});
