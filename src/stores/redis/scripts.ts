import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Cluster, Redis } from 'ioredis';

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

/** The full source of applyBatches.lua, loaded once. */
export const APPLY_BATCH_LUA = loadLua('applyBatches');

const COMMAND = 'sluiceApplyBatches';

/** The one client surface RedisStore uses: its script, plus what it needs for checks. */
type ScriptClient = (Redis | Cluster) & {
  [K in `${typeof COMMAND}Buffer`]?: (...args: (string | number)[]) => Promise<unknown>;
};

/**
 * Registers applyBatches on the client (once). ioredis sends it as EVALSHA and resends it
 * on NOSCRIPT; if that fails again, the source goes as EVAL. So a flushed script cache, a
 * restarted server or a promoted replica never surfaces as an error. Never call it
 * inside MULTI: there is no NOSCRIPT fallback there.
 */
export function applyBatchScript(
  client: Redis | Cluster,
): (keys: readonly string[], args: readonly (string | number)[]) => Promise<unknown> {
  const c = client as ScriptClient;
  if (typeof c[`${COMMAND}Buffer`] !== 'function')
    client.defineCommand(COMMAND, { lua: APPLY_BATCH_LUA });
  // The Buffer variant: replies carry packed binary doubles, which text decoding would mangle.
  const call = c[`${COMMAND}Buffer`] as (...args: (string | number)[]) => Promise<unknown>;
  return async (keys, args) => {
    try {
      return await call.call(client, keys.length, ...keys, ...args);
    } catch (error) {
      // ioredis resends once on NOSCRIPT, as EVALSHA when another call on the socket has
      // just loaded the script; a flush in between fails that too. NOSCRIPT means the
      // script never ran, so sending the source itself is safe: EVAL needs no cache.
      if (!(error instanceof Error) || !error.message.includes('NOSCRIPT')) throw error;
      return client.callBuffer('EVAL', APPLY_BATCH_LUA, keys.length, ...keys, ...args);
    }
  };
}
