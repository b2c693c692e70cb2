/** Real servers on 127.0.0.1 with a free port, for tests that start their own. */
import type { Server as HttpServer } from 'node:http';
import type { AddressInfo, Server } from 'node:net';

export interface Listening {
  readonly port: number;
  /** `http://127.0.0.1:<port>` */
  readonly url: string;
  /** Stops listening; an HTTP server's keep-alive connections are dropped too. */
  close(): Promise<void>;
}

/** Listens on 127.0.0.1 with a free port (a TCP or an HTTP server). */
export async function listen(server: Server): Promise<Listening> {
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  return {
    port,
    url: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        (server as Partial<HttpServer>).closeAllConnections?.();
        server.close(() => resolve());
      }),
  };
}
