/**
 * The Redis ceiling of Sluice's own script call. redis-benchmark cannot send it: its
 * arguments come from argv, C strings that end at the first zero byte, and the call's
 * argument is packed binary. So the call is captured from a real check with MONITOR (raw,
 * unescaped here) and replayed the way redis-benchmark would: 50 connections, 16
 * pipelined calls each, keys drawn at random (or one hot key) per call. The replay's own
 * client work is light (prebuilt arguments, replies skipped unparsed), and what it
 * measures is Redis's side: calls per second and command time per call.
 */
import net from 'node:net';
import type { Redis } from 'ioredis';
import type { CeilingResult } from './ceiling.js';
import { openWindow } from './redis-stats.js';

/** Unescapes one argument of a MONITOR line (sdscatrepr: \n \r \t \a \b \" \\ \xHH). */
export function unrepr(text: string): Buffer {
  const out: number[] = [];
  const simple: Record<string, number> = { n: 10, r: 13, t: 9, a: 7, b: 8, '"': 34, '\\': 92 };
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!;
    if (c !== '\\') {
      out.push(c.charCodeAt(0));
      continue;
    }
    const e = text[++i]!;
    if (e === 'x') {
      out.push(parseInt(text.slice(i + 1, i + 3), 16));
      i += 2;
    } else if (simple[e] !== undefined) {
      out.push(simple[e]);
    } else {
      throw new Error(`unexpected escape \\${e} in a MONITOR line`);
    }
  }
  return Buffer.from(out);
}

/** The quoted arguments of one MONITOR line, unescaped. */
export function monitorArgs(line: string): Buffer[] {
  const args: Buffer[] = [];
  const at = line.indexOf('"');
  let i = at;
  while (i >= 0 && i < line.length) {
    // find the closing quote, skipping escaped characters
    let j = i + 1;
    while (j < line.length && line[j] !== '"') j += line[j] === '\\' ? 2 : 1;
    args.push(unrepr(line.slice(i + 1, j)));
    i = line.indexOf('"', j + 1);
  }
  return args;
}

/**
 * Runs `check()` twice with MONITOR on (on a raw connection, so binary arguments arrive
 * escaped and are unescaped exactly) and returns the arguments of the last EVALSHA.
 */
export async function captureScriptCallRaw(
  port: number,
  check: () => Promise<unknown>,
): Promise<Buffer[]> {
  const socket = net.connect(port, '127.0.0.1');
  let last: Buffer[] | undefined;
  let pending = '';
  socket.setEncoding('latin1');
  socket.on('data', (chunk: string) => {
    pending += chunk;
    let nl: number;
    while ((nl = pending.indexOf('\r\n')) >= 0) {
      const line = pending.slice(0, nl);
      pending = pending.slice(nl + 2);
      if (line.includes('"evalsha"') || line.includes('"EVALSHA"')) last = monitorArgs(line);
    }
  });
  await new Promise<void>((resolve, reject) => {
    socket.once('connect', resolve);
    socket.once('error', reject);
  });
  socket.write('MONITOR\r\n');
  try {
    await new Promise((r) => setTimeout(r, 50));
    await check();
    await check();
    for (let i = 0; i < 50 && last === undefined; i++) await new Promise((r) => setTimeout(r, 20));
  } finally {
    socket.destroy();
  }
  if (last === undefined) throw new Error('no EVALSHA seen while capturing the script call');
  return last;
}

function resp(args: readonly Buffer[]): Buffer {
  const parts: Buffer[] = [Buffer.from(`*${args.length}\r\n`)];
  for (const a of args) parts.push(Buffer.from(`$${a.length}\r\n`), a, Buffer.from('\r\n'));
  return Buffer.concat(parts);
}

/**
 * Counts complete RESP replies in `buf` from `at`; returns [replies, next offset]. Throws on
 * an error reply: a ceiling of failing calls would measure nothing.
 */
function skipReplies(buf: Buffer, at: number): [number, number] {
  let n = 0;
  for (;;) {
    const end = skipOne(buf, at);
    if (end < 0) return [n, at];
    n++;
    at = end;
  }
}

function skipOne(buf: Buffer, at: number): number {
  if (at >= buf.length) return -1;
  const nl = buf.indexOf('\r\n', at);
  if (nl < 0) return -1;
  const type = String.fromCharCode(buf[at]!);
  const head = buf.toString('latin1', at + 1, nl);
  if (type === '-') throw new Error(`the script call failed: ${head}`);
  if (type === '+' || type === ':') return nl + 2;
  if (type === '$') {
    const len = Number(head);
    if (len < 0) return nl + 2;
    return nl + 2 + len + 2 <= buf.length ? nl + 2 + len + 2 : -1;
  }
  if (type === '*') {
    let p = nl + 2;
    for (let i = 0; i < Number(head); i++) {
      p = skipOne(buf, p);
      if (p < 0) return -1;
    }
    return p;
  }
  throw new Error(`unexpected reply type ${type}`);
}

/**
 * Replays `args` (one of which contains `placeholder`, replaced per call by a random key
 * number below 100,000, or by `hotKey`) `requests` times over 50 connections, 16 in flight
 * on each.
 */
export async function runScriptCeiling(
  admin: Redis,
  port: number,
  requests: number,
  args: readonly Buffer[],
  placeholder: string,
  hotKey: string | undefined,
): Promise<CeilingResult> {
  const CONNECTIONS = 50;
  const PIPELINE = 16;
  const keyed = args.map((a) => a.toString('latin1').includes(placeholder));
  // a pool of prebuilt calls, so the replay spends its time on the socket, not on building
  const pool = Array.from({ length: hotKey === undefined ? 4_096 : 1 }, () => {
    const key = hotKey ?? String(Math.floor(Math.random() * 100_000));
    return resp(
      args.map((a, i) =>
        keyed[i] ? Buffer.from(a.toString('latin1').replaceAll(placeholder, key), 'latin1') : a,
      ),
    );
  });
  const close = await openWindow(admin);
  let sent = 0;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: CONNECTIONS }, async () => {
      const socket = net.connect(port, '127.0.0.1');
      socket.setNoDelay(true);
      await new Promise<void>((resolve, reject) => {
        socket.once('connect', resolve);
        socket.once('error', reject);
      });
      let buf: Buffer = Buffer.alloc(0);
      try {
        while (sent < requests) {
          const n = Math.min(PIPELINE, requests - sent);
          sent += n;
          const calls: Buffer[] = [];
          for (let i = 0; i < n; i++) calls.push(pool[(Math.random() * pool.length) | 0]!);
          socket.write(Buffer.concat(calls));
          let got = 0;
          while (got < n) {
            const chunk = await new Promise<Buffer>((resolve, reject) => {
              socket.once('data', resolve);
              socket.once('error', reject);
            });
            buf = buf.length === 0 ? chunk : Buffer.concat([buf, chunk]);
            const [k, next] = skipReplies(buf, 0);
            got += k;
            buf = buf.subarray(next);
          }
        }
      } finally {
        socket.destroy();
      }
    }),
  );
  const seconds = (performance.now() - t0) / 1000;
  const window = await close(requests);
  const shown = args.map((a) => {
    const text = a.toString('latin1');
    if (/^[\x20-\x7e]*$/.test(text))
      return text.length > 60 ? `${text.slice(0, 57)}...` : text || "''";
    return `<${a.length} packed bytes>`;
  });
  return {
    callsPerSecond: requests / seconds,
    redisUsPerCall: window.commandUsPerDecision,
    command: shown.join(' '),
  };
}
