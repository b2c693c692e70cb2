/**
 * A minimal RESP2 client for the harness's own admin queries (PING, INFO, CLUSTER NODES).
 *
 * Why not ioredis: while a server is starting, stopping or failing over, ioredis reconnects,
 * queues commands and logs unhandled `error` events. The harness wants the opposite: one
 * connection, one command, one reply or one error, and nothing left open afterwards.
 */
import net from 'node:net';

/** A decoded RESP2 reply. Error replies are returned as {@link RespError}, not thrown. */
export type RespReply = string | number | null | RespError | RespReply[];

/** An error reply (`-ERR …`) from the server, returned as a value by {@link respCommand}. */
export class RespError {
  /** @param message - the error line without the leading `-` */
  constructor(readonly message: string) {}
}

/** Options for {@link respCommand}. */
export interface RespCommandOptions {
  /** Gives up (rejects) after this many milliseconds. @default 2000 */
  timeoutMs?: number;
}

/**
 * Sends one command on a fresh connection and resolves with its decoded reply.
 *
 * Rejects on connection failure, timeout, or when the socket closes before a complete reply.
 * Error replies resolve as {@link RespError} so callers can distinguish "server said no" from
 * "server is not there".
 *
 * @param host - e.g. `127.0.0.1`
 * @param port - TCP port
 * @param args - the command and its arguments, e.g. `['CLUSTER', 'KEYSLOT', 'user:1']`
 */
export function respCommand(
  host: string,
  port: number,
  args: readonly (string | number)[],
  options: RespCommandOptions = {},
): Promise<RespReply> {
  const timeoutMs = options.timeoutMs ?? 2000;
  return new Promise<RespReply>((resolve, reject) => {
    const socket = net.connect({ host, port });
    let buffer = Buffer.alloc(0);
    let settled = false;
    const finish = (error: Error | undefined, reply?: RespReply): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket.destroy();
      if (error) reject(error);
      else resolve(reply ?? null);
    };
    const timer = setTimeout(() => {
      finish(
        new Error(`RESP ${String(args[0])} to ${host}:${port} timed out after ${timeoutMs} ms`),
      );
    }, timeoutMs);
    socket.on('connect', () => {
      socket.write(encodeCommand(args));
    });
    socket.on('data', (chunk: Buffer) => {
      buffer = Buffer.concat([buffer, chunk]);
      let parsed: { reply: RespReply; end: number } | undefined;
      try {
        parsed = parseReply(buffer, 0);
      } catch (error) {
        finish(error instanceof Error ? error : new Error(String(error)));
        return;
      }
      if (parsed) finish(undefined, parsed.reply);
    });
    socket.on('error', (error) => {
      finish(error);
    });
    socket.on('close', () => {
      finish(new Error(`connection to ${host}:${port} closed before a complete reply`));
    });
  });
}

/**
 * Like {@link respCommand} but expects a bulk or simple string reply (INFO, CLUSTER NODES,
 * PING) and rejects on an error reply or any other type.
 */
export async function respString(
  host: string,
  port: number,
  args: readonly (string | number)[],
  options: RespCommandOptions = {},
): Promise<string> {
  const reply = await respCommand(host, port, args, options);
  if (typeof reply === 'string') return reply;
  if (reply instanceof RespError) {
    throw new Error(`${args.join(' ')} on ${host}:${port} failed: ${reply.message}`);
  }
  throw new Error(`${args.join(' ')} on ${host}:${port}: expected a string, got ${show(reply)}`);
}

/**
 * Parses `INFO` output (`key:value` lines, `# Section` headers) into a map.
 *
 * @example
 * parseInfo('# Replication\r\nrole:slave\r\nmaster_link_status:up\r\n').get('role') // 'slave'
 */
export function parseInfo(info: string): Map<string, string> {
  const fields = new Map<string, string>();
  for (const line of info.split(/\r?\n/)) {
    if (line === '' || line.startsWith('#')) continue;
    const colon = line.indexOf(':');
    if (colon > 0) fields.set(line.slice(0, colon), line.slice(colon + 1));
  }
  return fields;
}

function encodeCommand(args: readonly (string | number)[]): Buffer {
  const parts: Buffer[] = [Buffer.from(`*${args.length}\r\n`)];
  for (const arg of args) {
    const bytes = Buffer.from(String(arg), 'utf8');
    parts.push(Buffer.from(`$${bytes.length}\r\n`), bytes, Buffer.from('\r\n'));
  }
  return Buffer.concat(parts);
}

/** Returns undefined when `buffer` does not yet hold a complete reply starting at `start`. */
function parseReply(buffer: Buffer, start: number): { reply: RespReply; end: number } | undefined {
  const lineEnd = buffer.indexOf('\r\n', start);
  if (lineEnd < 0) return undefined;
  const type = String.fromCharCode(buffer[start] ?? 0);
  const line = buffer.toString('utf8', start + 1, lineEnd);
  const next = lineEnd + 2;
  switch (type) {
    case '+':
      return { reply: line, end: next };
    case '-':
      return { reply: new RespError(line), end: next };
    case ':':
      return { reply: Number(line), end: next };
    case '$': {
      const length = Number(line);
      if (length < 0) return { reply: null, end: next };
      if (buffer.length < next + length + 2) return undefined;
      return { reply: buffer.toString('utf8', next, next + length), end: next + length + 2 };
    }
    case '*': {
      const count = Number(line);
      if (count < 0) return { reply: null, end: next };
      const items: RespReply[] = [];
      let offset = next;
      for (let i = 0; i < count; i += 1) {
        const item = parseReply(buffer, offset);
        if (!item) return undefined;
        items.push(item.reply);
        offset = item.end;
      }
      return { reply: items, end: offset };
    }
    default:
      throw new Error(`unexpected RESP type byte ${JSON.stringify(type)}`);
  }
}

function show(reply: RespReply): string {
  return reply instanceof RespError ? `-${reply.message}` : JSON.stringify(reply);
}
