import { join } from 'node:path';
import { loadLua } from '../../src/stores/redis/scripts.js';

/** The Redis scripts' folder (src/stores/redis/lua). */
export const LUA_DIR = join(import.meta.dirname, '../../src/stores/redis/lua');

/**
 * The `local NAME = value` lines between the BEGIN and END SHARED CONSTANTS markers of
 * lua/includes/constants.lua, as scripts.ts assembles it (the algorithms' codes written
 * in from the registry): integers and single-quoted strings only, so nothing needs
 * evaluating. Throws on any other line in the block.
 */
export function luaConstants(): Map<string, number | string> {
  const text = loadLua('includes/constants');
  const block = /-- BEGIN SHARED CONSTANTS\n([\s\S]*?)-- END SHARED CONSTANTS/.exec(text);
  if (block === null) throw new Error('constants.lua: no BEGIN/END SHARED CONSTANTS block');
  const out = new Map<string, number | string>();
  for (const line of block[1]!.split('\n')) {
    if (line.trim() === '' || line.startsWith('--')) continue;
    const m = /^local ([A-Z][A-Z0-9_]*) = (-?\d+|'[^']*')$/.exec(line);
    if (m === null) throw new Error(`constants.lua: not a "local NAME = value" line: ${line}`);
    if (out.has(m[1]!)) throw new Error(`constants.lua: ${m[1]} defined twice`);
    out.set(m[1]!, m[2]!.startsWith("'") ? m[2]!.slice(1, -1) : Number(m[2]));
  }
  return out;
}

export { luaCodeName } from '../../src/stores/redis/scripts.js';
