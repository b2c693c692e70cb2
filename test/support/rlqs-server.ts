import * as grpc from '@grpc/grpc-js';
import type { Clock } from '../../src/core/clock.js';
import type { QuotaController } from '../../src/quota/controller.js';
import { RLQS_SERVICE } from '../../src/protocol/rlqs-protos.js';
import { RlqsQuotaService } from '../../src/quota/rlqs/quota-service.js';

export interface RlqsTestServer {
  readonly port: number;
  readonly server: grpc.Server;
  readonly service: RlqsQuotaService;
  /** Shuts the server down (in-flight streams are let finish). */
  stop(): Promise<void>;
}

/**
 * A real RLQS v3 gRPC server on a free loopback port, led by `controller`: what `sluice
 * controller` serves, without the process and its leader election.
 */
export async function startRlqsServer(
  controller: QuotaController,
  options: {
    readonly domain: string;
    readonly clock: Clock;
    readonly credentials?: grpc.ServerCredentials;
    readonly log?: (event: Record<string, unknown>) => void;
  },
): Promise<RlqsTestServer> {
  const service = new RlqsQuotaService({
    domain: options.domain,
    clock: options.clock,
    ...(options.log === undefined ? {} : { log: options.log }),
  });
  service.lead(controller);
  const server = new grpc.Server();
  server.addService(RLQS_SERVICE, service.handlers());
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync(
      '127.0.0.1:0',
      options.credentials ?? grpc.ServerCredentials.createInsecure(),
      (e, p) => (e ? reject(e) : resolve(p)),
    ),
  );
  return {
    port,
    server,
    service,
    stop: () => new Promise<void>((resolve) => server.tryShutdown(() => resolve())),
  };
}
