/**
 * The algorithm registry, the TypeScript algorithm files and the Lua includes agree: every
 * registered kind has its file under src/algorithms/, its include under lua/includes/
 * (in both entry scripts), and one code, the same in both languages. The files a new
 * algorithm needs are listed in docs/algorithms.md ("Adding an algorithm").
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ALGORITHMS } from '../../src/algorithms/index.js';
import { ALGORITHM_KINDS } from '../../src/core/policy.js';
import { LUA_ALGORITHM_CODE } from '../../src/stores/redis/lua-args.js';
import { LUA_DIR, luaCodeName, luaConstants } from '../support/lua-constants.js';

const ALGORITHMS_DIR = join(import.meta.dirname, '../../src/algorithms');
/** The TypeScript files under src/algorithms/ that are not an algorithm. */
const NOT_ALGORITHMS = ['algorithm.ts', 'index.ts', 'params.ts', 'refund.ts'];

/** `'sliding-window-counter'` → `slidingWindowCounter`, the include's file name. */
const camel = (kind: string): string => kind.replace(/-(\w)/g, (_, c: string) => c.toUpperCase());

describe('algorithm registry, TypeScript and Lua agree', () => {
  const lua = luaConstants();

  it.each(ALGORITHM_KINDS)('%s: registered, with its own TypeScript file', async (kind) => {
    const algorithm = ALGORITHMS[kind];
    expect(algorithm.kind).toBe(kind);
    const file = join(ALGORITHMS_DIR, `${kind}.ts`);
    expect(existsSync(file), `src/algorithms/${kind}.ts`).toBe(true);
    const module = (await import(/* @vite-ignore */ file)) as Record<string, unknown>;
    expect(
      Object.values(module),
      `src/algorithms/${kind}.ts exports the registered algorithm`,
    ).toContain(algorithm);
  });

  it.each(ALGORITHM_KINDS)('%s: one code, the same in TypeScript and Lua', (kind) => {
    const code = LUA_ALGORITHM_CODE[kind];
    expect(Number.isInteger(code) && code >= 1 && code <= 255, 'a state byte').toBe(true);
    expect(lua.get(luaCodeName(kind)), `${luaCodeName(kind)} in constants.lua`).toBe(code);
  });

  it.each(ALGORITHM_KINDS)(
    '%s: a Lua include that defines ALG[its code], in both entry scripts',
    (kind) => {
      const include = `includes/${camel(kind)}`;
      const text = readFileSync(join(LUA_DIR, `${include}.lua`), 'utf8');
      expect(text).toMatch(new RegExp(`^ALG\\[${luaCodeName(kind)}\\] = \\{`, 'm'));
      for (const entry of ['applyBatches', 'refundBatch']) {
        const source = readFileSync(join(LUA_DIR, `${entry}.lua`), 'utf8');
        expect(source, `${entry}.lua includes ${include}`).toContain(`--- @include "${include}"`);
      }
    },
  );

  it('has no algorithm code, TypeScript file or Lua include that the registry lacks', () => {
    const codes = Object.values(LUA_ALGORITHM_CODE);
    expect(new Set(codes).size).toBe(codes.length);
    expect(Object.keys(LUA_ALGORITHM_CODE).sort()).toEqual([...ALGORITHM_KINDS].sort());
    expect(Object.keys(ALGORITHMS).sort()).toEqual([...ALGORITHM_KINDS].sort());
    const luaCodes = [...lua.keys()].filter((n) => n.startsWith('CODE_')).sort();
    expect(luaCodes).toEqual(ALGORITHM_KINDS.map(luaCodeName).sort());
    const tsFiles = readdirSync(ALGORITHMS_DIR).filter(
      (f) => f.endsWith('.ts') && !NOT_ALGORITHMS.includes(f),
    );
    expect(tsFiles.sort()).toEqual(ALGORITHM_KINDS.map((k) => `${k}.ts`).sort());
    const defining = readdirSync(join(LUA_DIR, 'includes')).filter((f) =>
      /^ALG\[/m.test(readFileSync(join(LUA_DIR, 'includes', f), 'utf8')),
    );
    expect(defining.sort()).toEqual(ALGORITHM_KINDS.map((k) => `${camel(k)}.lua`).sort());
  });
});
