import * as grpc from '@grpc/grpc-js';
import { HEALTH_SERVICE, RLS_SERVICE, SLUICE_SERVICE } from '../../../src/protocol/protos.js';

/** Real @grpc/grpc-js clients built from the same proto files the server loads. */
export interface Clients {
  readonly rls: grpc.Client;
  readonly sluice: grpc.Client;
  readonly health: grpc.Client;
  close(): void;
}

const Rls = grpc.makeGenericClientConstructor(RLS_SERVICE, 'RateLimitService');
const Sluice = grpc.makeGenericClientConstructor(SLUICE_SERVICE, 'Sluice');
const Health = grpc.makeGenericClientConstructor(HEALTH_SERVICE, 'Health');

/** Connects the three clients to `127.0.0.1:port` over plaintext. */
export function connect(port: number): Clients {
  const address = `127.0.0.1:${port}`;
  const creds = grpc.credentials.createInsecure();
  const rls = new Rls(address, creds);
  const sluice = new Sluice(address, creds);
  const health = new Health(address, creds);
  return {
    rls,
    sluice,
    health,
    close: () => [rls, sluice, health].forEach((c) => c.close()),
  };
}

type UnaryMethod = (
  request: unknown,
  metadata: grpc.Metadata,
  options: grpc.CallOptions,
  callback: (error: grpc.ServiceError | null, response?: unknown) => void,
) => grpc.ClientUnaryCall;

/** Calls a unary method; rejects with the `ServiceError` (`code`, `details`, `metadata`). */
export function call<T>(
  client: grpc.Client,
  method: string,
  request: unknown,
  timeoutMs = 5_000,
  metadata = new grpc.Metadata(),
): Promise<T> {
  const fn = (client as unknown as Record<string, UnaryMethod>)[method];
  if (fn === undefined) throw new Error(`no method ${method}`);
  return new Promise((resolve, reject) => {
    fn.call(client, request, metadata, { deadline: Date.now() + timeoutMs }, (error, response) =>
      error === null ? resolve(response as T) : reject(error),
    );
  });
}

/** An open health Watch: messages as they arrive, and how the stream ended. */
export interface Watching {
  /** Resolves with the `n`-th status received (0-based). */
  nth(n: number): Promise<string>;
  /** Resolves with the final gRPC status code. */
  readonly ended: Promise<number>;
}

/** Opens `Health.Watch` for `service`. */
export function watch(client: grpc.Client, service: string): Watching {
  const stream = (
    client as unknown as Record<string, (req: unknown) => grpc.ClientReadableStream<unknown>>
  )['Watch']!.call(client, { service });
  const received: string[] = [];
  const waiters: (() => void)[] = [];
  stream.on('data', (m: { status: string }) => {
    received.push(m.status);
    waiters.splice(0).forEach((w) => w());
  });
  stream.on('error', () => undefined);
  const ended = new Promise<number>((resolve) =>
    stream.on('status', (s: grpc.StatusObject) => resolve(s.code)),
  );
  const nth = async (n: number): Promise<string> => {
    while (received.length <= n) await new Promise<void>((r) => waiters.push(r));
    return received[n]!;
  };
  return { nth, ended };
}
