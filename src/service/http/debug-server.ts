import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

/** One endpoint of the debug listener: its help line and its text. */
export interface DebugEndpoint {
  readonly help: string;
  readonly body: () =>
    Promise<{ contentType: string; body: string }> | { contentType: string; body: string };
}

/**
 * Upstream's debug listener (`DEBUG_HOST`:`DEBUG_PORT`): `GET /` lists the endpoints as
 * `path: help` lines, sorted; each endpoint answers its text. Upstream's Go profiling
 * endpoints (`/debug/pprof/*`) have no Node counterpart here.
 */
export class DebugServer {
  readonly #server: Server;

  constructor(endpoints: Readonly<Record<string, DebugEndpoint>>) {
    this.#server = createServer((req, res) => {
      const path = (req.url ?? '/').split('?')[0]!;
      if (req.method !== 'GET' && req.method !== 'HEAD') {
        res.writeHead(405, { allow: 'GET, HEAD' }).end();
        return;
      }
      if (path === '/') {
        const lines = Object.keys(endpoints)
          .sort()
          .map((p) => `${p}: ${endpoints[p]!.help}\n`);
        res.writeHead(200, { 'content-type': 'text/plain; charset=utf-8' }).end(lines.join(''));
        return;
      }
      const endpoint = endpoints[path];
      if (endpoint === undefined) {
        res
          .writeHead(404, { 'content-type': 'text/plain; charset=utf-8' })
          .end('404 page not found\n');
        return;
      }
      void Promise.resolve(endpoint.body()).then(
        (r) => res.writeHead(200, { 'content-type': r.contentType }).end(r.body),
        (error: unknown) => res.writeHead(500).end(`${String(error)}\n`),
      );
    });
  }

  /** Binds and resolves with the port (0 picks a free one). */
  listen(host: string, port: number): Promise<number> {
    return new Promise((resolve, reject) => {
      this.#server.once('error', reject);
      this.#server.listen(port, host, () => resolve((this.#server.address() as AddressInfo).port));
    });
  }

  close(): Promise<void> {
    this.#server.closeAllConnections();
    return new Promise((resolve) => this.#server.close(() => resolve()));
  }
}
