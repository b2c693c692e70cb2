import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { tokenBucket } from '../../../src/algorithms/token-bucket.js';
import { LUA_ALGORITHM_CODE } from '../../../src/stores/redis/lua-args.js';
import { refundArgs } from '../../../src/stores/redis/refund-call.js';
import { settleArgs } from '../../../src/stores/redis/settle-call.js';
import {
  DECIDED_AT_BYTES,
  DECISION_BYTES,
  NOT_SLUICE_STATE,
  REFUND_REPLY_FIELDS,
  STATUS,
} from '../../../src/stores/redis/reply.js';
import {
  FLAG_CLIENT_CLOCK,
  FLAG_DEDUP,
  HEADER_BYTES,
  ITEM_BYTES,
  TAG_DECISIONS,
  TAG_NOT_SLUICE_STATE,
} from '../../../src/stores/redis/wire.js';
import { LUA_DIR, luaCodeName, luaConstants } from '../../support/lua-constants.js';

/** Every Lua source of the scripts, by path under lua/, the constants block excluded. */
function luaSources(): Map<string, string> {
  const out = new Map<string, string>();
  for (const dir of ['', 'includes', 'algorithms']) {
    for (const f of readdirSync(join(LUA_DIR, dir)).filter((n) => n.endsWith('.lua'))) {
      const path = dir === '' ? f : `${dir}/${f}`;
      if (path !== 'includes/constants.lua')
        out.set(path, readFileSync(join(LUA_DIR, path), 'utf8'));
    }
  }
  return out;
}

/** Bytes of a little-endian `struct` format of the fields the scripts use. */
function structSize(format: string): number {
  const sizes: Record<string, number> = { B: 1, H: 2, I4: 4, d: 8 };
  let size = 0;
  for (const f of format.replace(/^</, '').match(/I4|./g) ?? []) {
    const n = sizes[f];
    if (n === undefined) throw new Error(`struct format ${format}: unknown field ${f}`);
    size += n;
  }
  return size;
}

/** What the TypeScript says each shared constant must be. */
function expected(): Map<string, number | string> {
  const e = new Map<string, number | string>();
  for (const [kind, code] of Object.entries(LUA_ALGORITHM_CODE)) e.set(luaCodeName(kind), code);
  STATUS.forEach((s, code) => e.set(`STATUS_${s}`, code));
  e.set('FLAG_CLIENT_CLOCK', FLAG_CLIENT_CLOCK);
  e.set('FLAG_DEDUP', FLAG_DEDUP);
  e.set('TAG_DECISIONS', TAG_DECISIONS);
  e.set('TAG_NOT_SLUICE_STATE', TAG_NOT_SLUICE_STATE);
  e.set('ITEM_IN_BYTES', ITEM_BYTES);
  e.set('ONE_BODY_BYTES', DECISION_BYTES + DECIDED_AT_BYTES);
  // refundBatch's ARGV: what refundArgs builds for one item, after its two leading fields
  const oneItem = refundArgs(
    [
      {
        key: '{t}:a',
        algorithm: tokenBucket,
        params: { rate: 1, periodMs: 1, burst: 1 },
        cost: 1,
        enforce: true,
      },
    ],
    0,
    '',
    1,
  );
  e.set('REFUND_FIRST_ARG', 3);
  e.set('REFUND_ITEM_ARGS', oneItem.length - 2);
  e.set('REFUND_REPLY_FIELDS', REFUND_REPLY_FIELDS);
  e.set('NOT_SLUICE_STATE', NOT_SLUICE_STATE);
  // settleBatch's ARGV: what settleArgs builds for one item, after its three leading fields
  const settleItem = settleArgs(
    [
      {
        key: '{t}:a',
        algorithm: tokenBucket,
        params: { rate: 1, periodMs: 1, burst: 1 },
        cost: 1,
        enforce: true,
        actual: 1,
        maxDebt: 1,
      },
    ],
    { keepMs: 1, reservedAtMs: 0 },
    '',
  );
  e.set('SETTLE_FIRST_ARG', 4);
  e.set('SETTLE_ITEM_ARGS', settleItem.length - 3);
  return e;
}

describe('constants shared by the Lua scripts and the TypeScript', () => {
  const lua = luaConstants();

  it('has every constant of the TypeScript in constants.lua, with the same value', () => {
    const mismatches: string[] = [];
    for (const [name, value] of expected()) {
      if (lua.get(name) !== value)
        mismatches.push(`${name}: TypeScript ${String(value)}, Lua ${String(lua.get(name))}`);
    }
    expect(mismatches).toEqual([]);
  });

  it('packs with formats whose sizes are the TypeScript byte counts', () => {
    expect(structSize(lua.get('BATCH_HEADER') as string)).toBe(HEADER_BYTES);
    expect(structSize(lua.get('ITEM_IN') as string)).toBe(ITEM_BYTES);
    expect(structSize(lua.get('ITEM') as string)).toBe(DECISION_BYTES);
  });

  it('has no constant in constants.lua that the TypeScript does not check or the scripts do not use', () => {
    const checked = new Set([...expected().keys(), 'BATCH_HEADER', 'ITEM_IN', 'ITEM']);
    const sources = [...luaSources().values()].join('\n');
    for (const name of lua.keys()) {
      expect(checked.has(name), `${name} is checked against the TypeScript`).toBe(true);
      expect(new RegExp(`\\b${name}\\b`).test(sources), `${name} is used by a script`).toBe(true);
    }
  });

  it('writes no algorithm code as a number literal outside constants.lua', () => {
    const literal =
      /ALG\[\d+\]|loadNumbers\(key, \w+, \d+\)|loadPacked\(key, \d+,|(struct\.pack|spack)\('<Bd+', \d+,/;
    for (const [path, text] of luaSources()) {
      text.split('\n').forEach((line, i) => {
        expect(literal.test(line), `${path}:${i + 1}: ${line.trim()}`).toBe(false);
      });
    }
  });
});
