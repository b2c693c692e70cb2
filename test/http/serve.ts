/** Real servers on 127.0.0.1, port 0, for the HTTP edge tests. */
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface Listening {
  readonly url: string;
  close(): Promise<void>;
}

/** Listens on 127.0.0.1 with a free port; `close` also drops keep-alive connections. */
export async function listen(server: Server): Promise<Listening> {
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** Headers that vary per response or framework and say nothing about rate limiting. */
const NOISE = new Set(['date', 'connection', 'keep-alive', 'x-powered-by', 'etag']);

/** Every response header except {@link NOISE}, as a plain object (names lower-case). */
export function headersOf(res: Response): Record<string, string> {
  const out: Record<string, string> = {};
  res.headers.forEach((value, name) => {
    if (!NOISE.has(name)) out[name] = value;
  });
  return out;
}

/** The status, the headers that matter and the body text of a response. */
export async function snapshot(
  res: Response,
): Promise<{ status: number; headers: Record<string, string>; body: string }> {
  return { status: res.status, headers: headersOf(res), body: await res.text() };
}
