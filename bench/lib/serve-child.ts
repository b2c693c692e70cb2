/**
 * A benchmark's HTTP server in a child process of its own, so that its CPU is measured
 * apart from the load generator's. The child prints `port <n>` once listening and
 * `cpu <µs>` (its user + system CPU so far) for every line it reads on stdin.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import type { Server } from 'node:http';

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

function lines(child: ChildProcess, onLine: (line: string) => void): void {
  let buf = '';
  child.stdout!.on('data', (c: Buffer) => {
    buf += c.toString();
    let nl;
    while ((nl = buf.indexOf('\n')) >= 0) {
      onLine(buf.slice(0, nl));
      buf = buf.slice(nl + 1);
    }
  });
}

/** A running child server: its port, its CPU so far (µs), and a stop that awaits its exit. */
export interface ServeChild {
  readonly port: number;
  cpuMicros(): Promise<number>;
  stop(): Promise<void>;
}

/** In the parent: runs `script --serve <mode>` under this Node and waits for its port. */
export async function startServeChild(script: string, mode: string): Promise<ServeChild> {
  const child = spawn(process.execPath, [...process.execArgv, script, '--serve', mode], {
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  const waiting: ((line: string) => void)[] = [];
  lines(child, (line) => waiting.shift()?.(line));
  const next = () => new Promise<string>((resolve) => waiting.push(resolve));
  const port = Number((await next()).split(' ')[1]);
  return {
    port,
    cpuMicros: async () => {
      const line = next();
      child.stdin!.write('\n');
      return Number((await line).split(' ')[1]);
    },
    stop: () =>
      new Promise<void>((resolve) => {
        child.once('exit', () => resolve());
        child.kill('SIGTERM');
      }),
  };
}
