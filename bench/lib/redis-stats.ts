/**
 * Redis-side figures for one measured window: command time from `INFO commandstats`
 * (reset with `CONFIG RESETSTAT` before the window), the server process's CPU from
 * `INFO cpu` deltas, and bytes per key from `MEMORY USAGE` on a sample of keys.
 */
import type { Redis } from 'ioredis';

export interface CommandStat {
  readonly calls: number;
  readonly usec: number;
}

/** `INFO commandstats` as command → {calls, usec}. */
export async function commandStats(admin: Redis): Promise<Map<string, CommandStat>> {
  const text = await admin.info('commandstats');
  const out = new Map<string, CommandStat>();
  for (const m of text.matchAll(/^cmdstat_([^:]+):calls=(\d+),usec=(\d+)/gm)) {
    out.set(m[1]!, { calls: Number(m[2]), usec: Number(m[3]) });
  }
  return out;
}

/** used_cpu_sys + used_cpu_user of the server process, in µs. */
export async function serverCpuUs(admin: Redis): Promise<number> {
  const text = await admin.info('cpu');
  const get = (field: string): number => {
    const m = new RegExp(`^${field}:([\\d.]+)`, 'm').exec(text);
    return m ? Number(m[1]) : 0;
  };
  return (get('used_cpu_sys') + get('used_cpu_user')) * 1e6;
}

/** Commands of the harness itself, left out of the per-decision command time. */
const ADMIN = new Set([
  'info',
  'config|resetstat',
  'config|get',
  'config',
  'ping',
  'client|setinfo',
  'client',
  'scan',
  'memory|usage',
  'monitor',
  'flushall',
  'script|load',
  'function|load',
  'function|list',
  'acl|setuser',
]);

/** Commands that run a script or function: Redis counts their time with what they call. */
const SCRIPT = new Set(['eval', 'evalsha', 'fcall', 'eval_ro', 'evalsha_ro', 'fcall_ro']);

export interface RedisWindow {
  /**
   * Command time per decision (commandstats usec, excluding the harness's own). A script's
   * time includes the commands it calls, which commandstats also lists on their own: when
   * the window ran scripts, only the scripts' time counts (both sides of this benchmark
   * send nothing but script calls: Sluice FCALL / EVALSHA, rate-limiter-flexible the
   * EVALSHA of its increment script); else every command's.
   */
  readonly commandUsPerDecision: number;
  /** Script calls (FCALL + EVALSHA + EVAL) per decision. */
  readonly scriptCallsPerDecision: number;
  /** Time per script call (FCALL + EVALSHA + EVAL), µs. */
  readonly scriptUsPerCall: number;
  /** The redis-server process's CPU (user + system, incl. networking) per decision, µs. */
  readonly processCpuUsPerDecision: number;
}

/** Starts a window: resets the command stats and reads the process CPU. */
export async function openWindow(
  admin: Redis,
): Promise<(decisions: number) => Promise<RedisWindow>> {
  await admin.config('RESETSTAT');
  const cpu0 = await serverCpuUs(admin);
  return async (decisions) => {
    const cpu1 = await serverCpuUs(admin);
    const stats = await commandStats(admin);
    let usec = 0;
    let scriptCalls = 0;
    let scriptUsec = 0;
    for (const [name, s] of stats) {
      if (ADMIN.has(name)) continue;
      usec += s.usec;
      if (SCRIPT.has(name)) {
        scriptCalls += s.calls;
        scriptUsec += s.usec;
      }
    }
    const per = (x: number): number => (decisions === 0 ? NaN : x / decisions);
    return {
      commandUsPerDecision: per(scriptCalls > 0 ? scriptUsec : usec),
      scriptCallsPerDecision: per(scriptCalls),
      scriptUsPerCall: scriptCalls === 0 ? NaN : scriptUsec / scriptCalls,
      processCpuUsPerDecision: per(cpu1 - cpu0),
    };
  };
}

/**
 * Mean `MEMORY USAGE` (SAMPLES 0: exact for these small values) over up to `sample` keys
 * matching `pattern`, found with SCAN. NaN when there are none.
 */
export async function bytesPerKey(admin: Redis, pattern: string, sample = 200): Promise<number> {
  const keys: string[] = [];
  let cursor = '0';
  do {
    const [next, batch] = await admin.scan(cursor, 'MATCH', pattern, 'COUNT', 1000);
    cursor = next;
    for (const k of batch) if (keys.length < sample) keys.push(k);
  } while (cursor !== '0' && keys.length < sample);
  if (keys.length === 0) return NaN;
  let total = 0;
  let n = 0;
  for (const k of keys) {
    const bytes = (await admin.call('MEMORY', 'USAGE', k, 'SAMPLES', '0')) as number | null;
    if (bytes === null) continue; // expired since the scan
    total += bytes;
    n++;
  }
  return n === 0 ? NaN : total / n;
}
