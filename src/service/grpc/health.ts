import * as grpc from '@grpc/grpc-js';
import type { WireHealthRequest, WireHealthResponse } from '../../protocol/wire.js';

/** A serving status as the health protocol names it. */
export type ServingStatus = 'SERVING' | 'NOT_SERVING';

type Watch = grpc.ServerWritableStream<WireHealthRequest, WireHealthResponse>;

/**
 * The `grpc.health.v1.Health` service for a fixed set of service names. `Check` on an
 * unknown name fails with NOT_FOUND and `Watch` sends SERVICE_UNKNOWN, as the protocol
 * asks. One instance per server.
 */
export class HealthService {
  readonly #statuses: Map<string, ServingStatus>;
  readonly #watches = new Set<Watch>();
  #ended = false;

  /** Every name in `names` starts as `initial`. */
  constructor(names: readonly string[], initial: ServingStatus) {
    this.#statuses = new Map(names.map((n) => [n, initial]));
  }

  /** Sets every known name to `status` and tells each open Watch whose status changed. */
  setAll(status: ServingStatus): void {
    const changed = [...this.#statuses].filter(([, s]) => s !== status).map(([n]) => n);
    for (const n of changed) this.#statuses.set(n, status);
    for (const w of this.#watches) if (changed.includes(w.request.service)) w.write({ status });
  }

  /**
   * Ends every open Watch stream (status OK), so a graceful shutdown need not wait on
   * them; a Watch that arrives later gets the current status and ends at once.
   */
  endWatches(): void {
    this.#ended = true;
    for (const w of this.#watches) w.end();
    this.#watches.clear();
  }

  /** The handlers to register with `HEALTH_SERVICE`. */
  readonly implementation: grpc.UntypedServiceImplementation = {
    Check: ((call, callback) => {
      const status = this.#statuses.get(call.request.service);
      if (status === undefined) {
        callback({
          code: grpc.status.NOT_FOUND,
          details: `unknown service "${call.request.service}"`,
        });
      } else callback(null, { status });
    }) satisfies grpc.handleUnaryCall<WireHealthRequest, WireHealthResponse>,
    Watch: ((call) => {
      call.write({ status: this.#statuses.get(call.request.service) ?? 'SERVICE_UNKNOWN' });
      if (this.#ended) return void call.end();
      this.#watches.add(call);
      call.on('cancelled', () => this.#watches.delete(call));
    }) satisfies grpc.handleServerStreamingCall<WireHealthRequest, WireHealthResponse>,
  };
}
