import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { ControllerProcessStatus } from './controller-process.js';

/** What {@link startControllerHttp} serves from. */
export interface ControllerHttpOptions {
  readonly host: string;
  /** 0 picks a free port. */
  readonly port: number;
  readonly status: () => ControllerProcessStatus;
  readonly metrics: () => Promise<{ contentType: string; body: string }>;
}

/**
 * Whether a controller can do its job: connected to Redis, and either leading or
 * following a leader it knows of. A follower is ready: agents that reach it are sent on
 * to the leader, and it is the leader's successor if that one goes.
 */
export function controllerReady(s: ControllerProcessStatus): boolean {
  return s.connected && (s.leading || s.leader !== undefined);
}

/**
 * The controller's operations endpoints: `GET /healthcheck` (200 while the process runs),
 * `GET /ready` (200 when {@link controllerReady}, else 503, with the status as JSON) and
 * `GET /metrics` (Prometheus text). Anything else is 404.
 */
export async function startControllerHttp(
  o: ControllerHttpOptions,
): Promise<{ port: number; close(): Promise<void> }> {
  const server: Server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.writeHead(405, { allow: 'GET, HEAD' }).end();
    } else if (path === '/healthcheck') {
      res.writeHead(200, { 'content-type': 'text/plain; charset=utf-8' }).end('OK');
    } else if (path === '/ready') {
      const s = o.status();
      res.writeHead(controllerReady(s) ? 200 : 503, { 'content-type': 'application/json' }).end(
        JSON.stringify({
          ready: controllerReady(s),
          connected: s.connected,
          leading: s.leading,
          term: s.term,
          leader: s.leader ?? null,
        }),
      );
    } else if (path === '/metrics') {
      o.metrics().then(
        (m) => res.writeHead(200, { 'content-type': m.contentType }).end(m.body),
        () => res.writeHead(500).end(),
      );
    } else {
      res.writeHead(404).end();
    }
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(o.port, o.host, () => resolve());
  });
  return {
    port: (server.address() as AddressInfo).port,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
