/**
 * A benchmark's side in a child process of its own, so that its CPU is measured apart
 * from the load generator's (or from the other sides'). The protocol is lines: the
 * parent writes one request line on the child's stdin, the child answers one line on
 * stdout, in order.
 *
 * - An HTTP server child (serveToParent / startServeChild) prints `port <n>` once
 *   listening and `cpu <µs>` (its user + system CPU so far) for every line it reads.
 * - A general child (answerParent / startChild) answers each request line with whatever
 *   its handler returns, and can be pinned to CPU cores with `taskset`.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import type { Server } from 'node:http';
import type { Readable } from 'node:stream';

/** In the child: announce the port once `server` listens, answer CPU readings on stdin. */
export function serveToParent(server: Server): void {
  server.listen(0, '127.0.0.1', () => {
    const address = server.address();
    process.stdout.write(`port ${typeof address === 'object' && address ? address.port : 0}\n`);
  });
  process.stdin.on('data', () => {
    const u = process.cpuUsage();
    process.stdout.write(`cpu ${u.user + u.system}\n`);
  });
}

function lines(stream: Readable, onLine: (line: string) => void): void {
  let buf = '';
  stream.on('data', (c: Buffer) => {
    buf += c.toString();
    let nl;
    while ((nl = buf.indexOf('\n')) >= 0) {
      onLine(buf.slice(0, nl));
      buf = buf.slice(nl + 1);
    }
  });
}

/**
 * In the child: answers each request line with `handle`'s line (requests are handled one
 * at a time, in order), after first printing `ready`. A handler that throws answers
 * `error <message>`.
 */
export function answerParent(handle: (request: string) => Promise<string>): void {
  let chain = Promise.resolve();
  lines(process.stdin, (request) => {
    chain = chain.then(async () => {
      let answer: string;
      try {
        answer = await handle(request);
      } catch (error) {
        answer = `error ${error instanceof Error ? error.message : String(error)}`;
      }
      process.stdout.write(`${answer.replace(/\n/g, ' ')}\n`);
    });
  });
  process.stdout.write('ready\n');
}

/** A running child: one request line, one answer line; stop awaits its exit. */
export interface Child {
  readonly pid: number;
  /** Sends `line`, resolves with the child's answer (rejects on `error …` or exit). */
  request(line: string): Promise<string>;
  stop(): Promise<void>;
}

/**
 * In the parent: runs `script ...args` under this Node (with the tsx loader), pinned
 * to `cores` with taskset when given, and resolves once the child printed its first line
 * (`ready` for answerParent; `port <n>` for serveToParent), returned as `first`.
 */
export async function startChild(
  script: string,
  args: readonly string[],
  cores?: string,
): Promise<Child & { readonly first: string }> {
  // Under tsx the loader is in execArgv already; elsewhere (a test runner) add it.
  const loader =
    script.endsWith('.ts') && !process.execArgv.some((a) => a.includes('tsx'))
      ? ['--import', 'tsx']
      : [];
  const node = [process.execPath, ...process.execArgv, ...loader, script, ...args];
  const child: ChildProcess =
    cores === undefined
      ? spawn(node[0]!, node.slice(1), { stdio: ['pipe', 'pipe', 'inherit'] })
      : spawn('taskset', ['-c', cores, ...node], { stdio: ['pipe', 'pipe', 'inherit'] });
  const waiting: { resolve: (line: string) => void; reject: (e: Error) => void }[] = [];
  let exited = false;
  lines(child.stdout!, (line) => waiting.shift()?.resolve(line));
  child.once('exit', (code, signal) => {
    exited = true;
    const error = new Error(`${script} exited (${code ?? signal}) before answering`);
    for (const w of waiting.splice(0)) w.reject(error);
  });
  const next = (): Promise<string> =>
    exited
      ? Promise.reject(new Error(`${script} has exited`))
      : new Promise<string>((resolve, reject) => waiting.push({ resolve, reject }));
  const first = await next();
  return {
    pid: child.pid!,
    first,
    request: async (line) => {
      const answer = next();
      child.stdin!.write(`${line}\n`);
      const text = await answer;
      if (text.startsWith('error ')) throw new Error(`${script}: ${text.slice(6)}`);
      return text;
    },
    stop: () =>
      new Promise<void>((resolve) => {
        if (exited) return resolve();
        child.once('exit', () => resolve());
        child.kill('SIGTERM');
      }),
  };
}

/** A running child server: its port, its CPU so far (µs), and a stop that awaits its exit. */
export interface ServeChild {
  readonly port: number;
  cpuMicros(): Promise<number>;
  stop(): Promise<void>;
}

/** In the parent: runs `script --serve <mode>` under this Node and waits for its port. */
export async function startServeChild(script: string, mode: string): Promise<ServeChild> {
  const child = await startChild(script, ['--serve', mode]);
  return {
    port: Number(child.first.split(' ')[1]),
    cpuMicros: async () => Number((await child.request('')).split(' ')[1]),
    stop: () => child.stop(),
  };
}
