/**
 * `sluice serve` as a separate process (the built CLI, dist/), for the tests that run the
 * service the way users do, and the request those tests send (fixtures/redis-svc: 100 per
 * minute per tenant, domain `svc`).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { join } from 'node:path';
import { freePort } from './free-port.js';
import { sleep, waitFor } from './wait.js';

const cli = join(import.meta.dirname, '../../dist/cli/main.js');

/** One spawned `sluice serve`, its ports and its output (kept for failure messages). */
export interface Serve {
  readonly child: ChildProcess;
  readonly httpPort: number;
  readonly grpcPort: number;
  readonly output: string[];
  /** Its standard output alone (the JSON log lines), as received. */
  readonly stdout: string[];
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/**
 * Spawns `sluice serve <args>` on free loopback ports and resolves once `/healthcheck`
 * answers 200 `OK`. The environment is this process's without `REDIS_URL` and
 * `REDIS_TYPE`, plus `env`. `STORE_TIMEOUT_MS` is 5000 unless `env` says otherwise: these
 * tests prove exactness across processes, not latency, and a generous store deadline
 * keeps a loaded CI machine from turning slow round trips into UNAVAILABLE answers.
 */
export async function spawnServe(
  args: readonly string[],
  env: NodeJS.ProcessEnv = {},
): Promise<Serve> {
  const [httpPort, grpcPort] = [await freePort(), await freePort()];
  const childEnv: NodeJS.ProcessEnv = {
    ...process.env,
    PORT: String(httpPort),
    GRPC_PORT: String(grpcPort),
    STORE_TIMEOUT_MS: '5000',
    HOST: '127.0.0.1',
    GRPC_HOST: '127.0.0.1',
  };
  delete childEnv['REDIS_URL'];
  delete childEnv['REDIS_TYPE'];
  Object.assign(childEnv, env);
  const child = spawn(process.execPath, [cli, 'serve', ...args], {
    env: childEnv,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const output: string[] = [];
  const stdout: string[] = [];
  child.stdout?.on('data', (b: Buffer) => {
    output.push(b.toString());
    stdout.push(b.toString());
  });
  child.stderr?.on('data', (b: Buffer) => output.push(b.toString()));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('exit', (code, signal) => resolve({ code, signal })),
  );
  const s: Serve = { child, httpPort, grpcPort, output, stdout, exited };
  try {
    await waitFor(
      async (report) => {
        if (child.exitCode !== null || child.signalCode !== null) {
          throw new Error(`sluice serve exited early: ${output.join('')}`);
        }
        const r = await fetch(`http://127.0.0.1:${httpPort}/healthcheck`);
        const text = await r.text();
        report(`${r.status} ${text}`);
        return r.status === 200 && text === 'OK' ? true : undefined;
      },
      {
        what: `sluice serve ${args.join(' ')} on :${httpPort} to be healthy`,
        timeoutMs: 60_000,
        intervalMs: 50,
        fatal: (e) => e instanceof Error && e.message.startsWith('sluice serve exited early'),
      },
    );
  } catch (error) {
    // Never healthy: stop it here, since the caller never gets it to stop.
    if (child.pid !== undefined && child.exitCode === null && child.signalCode === null) {
      process.kill(child.pid, 'SIGKILL');
    }
    throw error;
  }
  return s;
}

/** SIGTERM by PID, then SIGKILL when it has not exited after `timeoutMs`. */
export async function stopServe(s: Serve, timeoutMs = 5_000): Promise<void> {
  if (s.child.exitCode !== null || s.child.signalCode !== null || s.child.pid === undefined) return;
  process.kill(s.child.pid, 'SIGTERM');
  const done = await Promise.race([s.exited.then(() => true), sleep(timeoutMs).then(() => false)]);
  if (!done && s.child.exitCode === null && s.child.signalCode === null) {
    process.kill(s.child.pid, 'SIGKILL');
    await s.exited;
  }
}

/** A ShouldRateLimit request of one `tenant` descriptor in domain `svc`. */
export const svcRequest = (tenant: string) => ({
  domain: 'svc',
  descriptors: [{ entries: [{ key: 'tenant', value: tenant }] }],
});
