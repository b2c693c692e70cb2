import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Cluster, Redis } from 'ioredis';
import { ALGORITHMS } from '../../algorithms/index.js';
import { FunctionLibrary } from './function-library.js';

const LUA_DIR = join(dirname(fileURLToPath(import.meta.url)), 'lua');
const INCLUDE = /^--- @include "([\w/]+)"\s*$/gm;
/** Every file of lua/algorithms/, one per algorithm. */
const INCLUDE_ALGORITHMS = /^--- @include-algorithms\s*$/gm;
/** Each algorithm's `local CODE_<KIND> = <luaCode>` line. */
const ALGORITHM_CODES = /^--- @algorithm-codes\s*$/gm;

/** The Lua name of an algorithm's code: `'token-bucket'` → `CODE_TOKEN_BUCKET`. */
export function luaCodeName(kind: string): string {
  return `CODE_${kind.toUpperCase().replace(/-/g, '_')}`;
}

function algorithmCodeLines(): string {
  return Object.values(ALGORITHMS)
    .sort((a, b) => a.luaCode - b.luaCode)
    .map((a) => `local ${luaCodeName(a.kind)} = ${a.luaCode}`)
    .join('\n');
}

/** The algorithms' includes (`algorithms/<name>`), in file-name order. */
function algorithmIncludes(): string[] {
  return readdirSync(join(LUA_DIR, 'algorithms'))
    .filter((f) => f.endsWith('.lua'))
    .sort()
    .map((f) => `algorithms/${f.slice(0, -'.lua'.length)}`);
}

/**
 * Reads a Lua entry script and splices in its `--- @include "includes/x"` lines
 * (recursively, each file once), so shared step bodies live in one place; `---
 * @include-algorithms` stands for every file of lua/algorithms/, and `---
 * @algorithm-codes` for the algorithms' codes, from the registry: a new algorithm is its
 * TypeScript file, its Lua file and its registry entry.
 */
export function loadLua(name: string, seen = new Set<string>()): string {
  seen.add(name);
  const include = (inc: string): string => (seen.has(inc) ? '' : loadLua(inc, seen));
  return readFileSync(join(LUA_DIR, `${name}.lua`), 'utf8')
    .replace(ALGORITHM_CODES, () => algorithmCodeLines())
    .replace(INCLUDE_ALGORITHMS, () => algorithmIncludes().map(include).join('\n'))
    .replace(INCLUDE, (_, inc: string) => include(inc));
}

/** applyBatches.lua with its includes: it defines `applyBatches(KEYS, ARGV)`. */
const APPLY_BATCH_BODY = loadLua('applyBatches');

/** The full source of applyBatches.lua as a script (EVAL / EVALSHA), loaded once. */
export const APPLY_BATCH_LUA = `${APPLY_BATCH_BODY}\nreturn applyBatches(KEYS, ARGV)\n`;

/** The full source of refundBatch.lua, loaded once. */
export const REFUND_BATCH_LUA = loadLua('refundBatch');

/** The full source of settleBatch.lua, loaded once. */
export const SETTLE_BATCH_LUA = loadLua('settleBatch');

/** A script as RedisStore calls it: keys and args in, the raw reply out. */
export type ScriptCall = (
  keys: readonly string[],
  args: readonly (string | number | Buffer)[],
) => Promise<unknown>;

type ScriptClient = (Redis | Cluster) & Record<string, unknown>;

/**
 * applyBatches on the client, with binary replies: they carry packed doubles, which text
 * decoding would mangle. Sent as FCALL of a function library once it is loaded on the
 * server (Redis 7+, see FunctionLibrary), else as EVALSHA, which ioredis resends on
 * NOSCRIPT; if that fails again, the source goes as EVAL. A call that finds neither the
 * function nor the script did not run, so it is sent again the next way: a flushed
 * cache, a restarted server or a promoted replica never surfaces as an error. Never call
 * it inside MULTI: there is no fallback there. On a Cluster, ioredis routes the call by
 * its keys' slot (every key of one call must share a slot).
 */
export function applyBatchScript(client: Redis | Cluster): ScriptCall {
  const evalsha = script(client, 'sluiceApplyBatches', APPLY_BATCH_LUA, true);
  const library = new FunctionLibrary(client, APPLY_BATCH_BODY, 'applyBatches');
  const again =
    (keys: readonly string[], args: readonly (string | number | Buffer)[]) =>
    (error: unknown): Promise<unknown> => {
      if (!FunctionLibrary.isMissing(error)) throw error;
      library.missing();
      return evalsha(keys, args);
    };
  return (keys, args) =>
    library.state === 'loaded'
      ? library.call(keys, args).catch(again(keys, args))
      : evalsha(keys, args);
}

/** Registers refundBatch on the client (once), with the same NOSCRIPT recovery. */
export function refundBatchScript(client: Redis | Cluster): ScriptCall {
  return script(client, 'sluiceRefundBatch', REFUND_BATCH_LUA, false);
}

/** Registers settleBatch on the client (once), with the same NOSCRIPT recovery. */
export function settleBatchScript(client: Redis | Cluster): ScriptCall {
  return script(client, 'sluiceSettleBatch', SETTLE_BATCH_LUA, false);
}

function script(
  client: Redis | Cluster,
  command: string,
  lua: string,
  binary: boolean,
): ScriptCall {
  const c = client as ScriptClient;
  const name = binary ? `${command}Buffer` : command;
  if (typeof c[name] !== 'function') client.defineCommand(command, { lua });
  const call = c[name] as (...args: (string | number | Buffer)[]) => Promise<unknown>;
  return async (keys, args) => {
    try {
      return await call.call(client, keys.length, ...keys, ...args);
    } catch (error) {
      // ioredis resends once on NOSCRIPT, as EVALSHA when another call on the socket has
      // just loaded the script; a flush in between fails that too. NOSCRIPT means the
      // script never ran, so sending the source itself is safe: EVAL needs no cache.
      if (!(error instanceof Error) || !error.message.includes('NOSCRIPT')) throw error;
      return binary
        ? client.callBuffer('EVAL', lua, keys.length, ...keys, ...args)
        : client.eval(lua, keys.length, ...keys, ...args);
    }
  };
}
