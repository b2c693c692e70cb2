import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Cluster, Redis } from 'ioredis';
import { FunctionLibrary } from './function-library.js';

const LUA_DIR = join(dirname(fileURLToPath(import.meta.url)), 'lua');
const INCLUDE = /^--- @include "([\w/]+)"\s*$/gm;

/**
 * Reads a Lua entry script and splices in its `--- @include "includes/x"` lines
 * (recursively, each file once), so shared step bodies live in one place.
 */
export function loadLua(name: string, seen = new Set<string>()): string {
  seen.add(name);
  const text = readFileSync(join(LUA_DIR, `${name}.lua`), 'utf8');
  return text.replace(INCLUDE, (_, inc: string) => (seen.has(inc) ? '' : loadLua(inc, seen)));
}

/** applyBatches.lua with its includes: it defines `applyBatches(KEYS, ARGV)`. */
const APPLY_BATCH_BODY = loadLua('applyBatches');

/** The full source of applyBatches.lua as a script (EVAL / EVALSHA), loaded once. */
export const APPLY_BATCH_LUA = `${APPLY_BATCH_BODY}\nreturn applyBatches(KEYS, ARGV)\n`;

/** The full source of refundBatch.lua, loaded once. */
export const REFUND_BATCH_LUA = loadLua('refundBatch');

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
