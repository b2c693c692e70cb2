/**
 * The algorithm registry, the TypeScript algorithm files and the Lua includes agree: every
 * registered kind has its file under src/algorithms/, its Lua file under lua/algorithms/
 * (in both assembled scripts), and one code, the same in both languages; the script
 * parameters its file sends are the ones its include's header names, in order. And the
 * knowledge stays there: no file outside src/algorithms/ reads a policy's params by field
 * name. The files a new algorithm needs are listed in docs/algorithms.md ("Adding an
 * algorithm").
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ALGORITHMS } from '../../src/algorithms/index.js';
import { ALGORITHM_KINDS } from '../../src/algorithms/index.js';
import { LUA_ALGORITHM_CODE } from '../../src/stores/redis/lua-args.js';
import {
  APPLY_BATCH_LUA,
  REFUND_BATCH_LUA,
  SETTLE_BATCH_LUA,
} from '../../src/stores/redis/scripts.js';
import { LUA_DIR, luaCodeName, luaConstants } from '../support/lua-constants.js';

const ALGORITHMS_DIR = join(import.meta.dirname, '../../src/algorithms');
/** The TypeScript files under src/algorithms/ that are not an algorithm. */
const NOT_ALGORITHMS = ['algorithm.ts', 'costs.ts', 'index.ts', 'params.ts', 'refund.ts'];

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
    '%s: a Lua file that defines ALG[its code], in both assembled scripts',
    (kind) => {
      const file = `algorithms/${camel(kind)}.lua`;
      const text = readFileSync(join(LUA_DIR, file), 'utf8');
      const defines = new RegExp(`^ALG\\[${luaCodeName(kind)}\\] = \\{`, 'm');
      expect(text).toMatch(defines);
      // What settleBatch.lua calls: the refund and a charge, or a settle of its own.
      const has = (fn: string) =>
        new RegExp(`^ALG\\[${luaCodeName(kind)}\\]\\.${fn} = function`, 'm').test(text);
      expect(
        has('refund') && (has('charge') || has('settle')),
        `${file}: refund and charge, or settle`,
      ).toBe(true);
      for (const [entry, script] of [
        ['applyBatches', APPLY_BATCH_LUA],
        ['refundBatch', REFUND_BATCH_LUA],
        ['settleBatch', SETTLE_BATCH_LUA],
      ] as const) {
        expect(script, `${entry} as assembled holds ${file}`).toContain(text);
        expect(script.match(new RegExp(defines, 'gm')), `${file} once in ${entry}`).toHaveLength(1);
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
    const luaFiles = readdirSync(join(LUA_DIR, 'algorithms'));
    expect(luaFiles.sort()).toEqual(ALGORITHM_KINDS.map((k) => `${camel(k)}.lua`).sort());
    const definingElsewhere = readdirSync(join(LUA_DIR, 'includes')).filter((f) =>
      /^ALG\[/m.test(readFileSync(join(LUA_DIR, 'includes', f), 'utf8')),
    );
    expect(definingElsewhere).toEqual([]);
  });

  it.each(ALGORITHM_KINDS)(
    '%s: sends its include the params its header names (p1..p4), from its own file',
    (kind) => {
      const algorithm = ALGORITHMS[kind];
      const text = readFileSync(join(LUA_DIR, `algorithms/${camel(kind)}.lua`), 'utf8');
      const header = /^-- Params: (.*)$/m.exec(text);
      expect(header, `algorithms/${camel(kind)}.lua has a "-- Params:" line`).not.toBeNull();
      // Distinct numbers, so a swapped pair shows; the charging-denied form where there is one.
      const base = algorithm.paramsSchema.parse(algorithm.paramsFor(7, 3_000, 11));
      const variants = [
        base,
        ...(algorithm.chargingDenied ? [algorithm.chargingDenied(base)] : []),
      ];
      for (const params of variants) {
        const fields = params as Record<string, unknown>;
        const sent = algorithm.scriptParams(params);
        expect(sent).toHaveLength(4);
        const expected = [0, 0, 0, 0];
        for (const [, slot, text] of header![1]!.matchAll(/p(\d) ([^,.]+)/g)) {
          // The field is the first word, or the one in parentheses when that is not a field
          // (an absent flag field is 0: `chargeDenied` exists only in the charging form).
          const first = text!.split(' ')[0]!;
          const named = first in fields ? first : /\((\w+)\)/.exec(text!)?.[1];
          expect(named, `p${slot} of ${kind}: "${text}"`).toBeDefined();
          const v = fields[named!];
          expected[Number(slot) - 1] =
            typeof v === 'number' ? v : v === true || v === 'delay' ? 1 : 0;
        }
        expect(sent).toEqual(expected);
      }
      expect(Number.isFinite(algorithm.refillPerMs(base)) && algorithm.refillPerMs(base) >= 0).toBe(
        true,
      );
      const quota = algorithm.quota(base);
      expect(quota.units).toBeGreaterThan(0);
      expect(quota.windowMs).toBeGreaterThan(0);
      expect(quota.burst !== undefined).toBe(algorithm.hasBurst);
    },
  );

  it('keeps knowledge of each algorithm in src/algorithms/: no params read by field name elsewhere', () => {
    const src = join(ALGORITHMS_DIR, '..');
    const readers: string[] = [];
    for (const file of readdirSync(src, { recursive: true }) as string[]) {
      if (!file.endsWith('.ts') || file.startsWith('algorithms')) continue;
      const text = readFileSync(join(src, file), 'utf8');
      for (const m of text.matchAll(
        /params(\[['"]\w+['"]\]|\??\.(rate|burst|limit|periodMs|windowMs|capacity|mode)\b)/g,
      )) {
        readers.push(`src/${file}: ${m[0]}`);
      }
    }
    expect(readers).toEqual([]);
  });
});
