import * as grpc from '@grpc/grpc-js';
import { DEFAULT_DESCRIPTOR_LIMITS, type DescriptorLimits } from '../../core/descriptor-limits.js';
import { toCallError } from '../../protocol/call-error.js';
import { decodeCheckRequest, decodeRlsRequest } from './decode.js';
import { encodeCheckResponse, encodeRlsResponse } from './encode.js';
import { HealthService } from './health.js';
import {
  HEALTH_SERVICE,
  RLS_SERVICE,
  SERVICE_NAMES,
  SLUICE_SERVICE,
} from '../../protocol/protos.js';
import {
  guardMethod,
  precheckCheckRequest,
  precheckRlsRequest,
  RefusedRequest,
} from './request-guard.js';
import type { CallContext, GrpcHandlers } from './handlers.js';
import type {
  WireCheckRequest,
  WireCheckResponse,
  WireRlsRequest,
  WireRlsResponse,
} from '../../protocol/wire.js';
import { REQUEST_ID_METADATA_KEY } from '../../protocol/metadata.js';
import { requestIdOf } from '../request-id.js';

/**
 * Health service names that report the server's state: `""` (the whole server),
 * `ratelimit` (as envoyproxy/ratelimit's probes ask) and the two API services' full names.
 */
export const HEALTH_SERVICE_NAMES: readonly string[] = Object.freeze([
  '',
  'ratelimit',
  SERVICE_NAMES.rls,
  SERVICE_NAMES.sluice,
]);

/** Options of {@link createGrpcServer}. */
export interface GrpcServerOptions {
  /**
   * How long `shutdown()` lets in-flight calls finish before cancelling them, in ms.
   * @default 10_000
   */
  readonly shutdownTimeoutMs?: number;
  /**
   * How long `shutdown()` keeps serving after health turns NOT_SERVING, in ms, so load
   * balancers stop sending traffic before new calls are refused. @default 0
   */
  readonly drainDelayMs?: number;
  /** @default grpc.ServerCredentials.createInsecure() */
  readonly credentials?: grpc.ServerCredentials;
  /** Passed to `new grpc.Server()` (message size limits, keepalive, …). @default {} */
  readonly serverOptions?: grpc.ServerOptions;
  /**
   * Bounds on the descriptors of ShouldRateLimit and Check requests; the counts are
   * checked on the request bytes, before decoding. @default DEFAULT_DESCRIPTOR_LIMITS
   */
  readonly descriptorLimits?: DescriptorLimits;
  /**
   * Called with every handler failure that is not a `SluiceError` (the client sees only
   * INTERNAL "internal error"), and the method's path. @default ignore
   */
  readonly onError?: (error: unknown, method: string) => void;
}

/** How a shutdown ended. */
export interface ShutdownResult {
  /** True when in-flight calls outlived `shutdownTimeoutMs` and were cancelled. */
  readonly forced: boolean;
}

// grpc-js also emits 'cancelled' once a finished call closes, so only a call that has
// not been answered yet aborts its signal.
function contextOf(call: grpc.ServerUnaryCall<unknown, unknown>): {
  readonly context: CallContext;
  readonly answered: () => void;
} {
  const controller = new AbortController();
  let answered = false;
  call.on('cancelled', () => {
    if (!answered) controller.abort(new Error('call cancelled'));
  });
  const deadline = call.getDeadline();
  const deadlineMs = deadline instanceof Date ? deadline.getTime() : deadline;
  const requestId = requestIdOf(call.metadata.get(REQUEST_ID_METADATA_KEY)[0]);
  const header = (name: string): string | undefined => {
    const value = call.metadata.get(name)[0];
    return typeof value === 'string' ? value : undefined;
  };
  const context: CallContext = {
    signal: controller.signal,
    header,
    ...(Number.isFinite(deadlineMs) ? { timeoutMs: Math.max(0, deadlineMs - Date.now()) } : {}),
    ...(requestId === undefined ? {} : { requestId }),
  };
  return { context, answered: () => void (answered = true) };
}

function unary<WireReq, WireRes>(
  run: (wire: WireReq, context: CallContext) => Promise<WireRes>,
  onError: (error: unknown, method: string) => void,
): grpc.handleUnaryCall<WireReq, WireRes> {
  return (call, callback) => {
    const { context, answered } = contextOf(call);
    const request: WireReq | RefusedRequest = call.request;
    (request instanceof RefusedRequest
      ? Promise.reject(request.error)
      : run(request, context)
    ).then(
      (response) => {
        answered();
        callback(null, response);
      },
      (error: unknown) => {
        answered();
        const { status, unexpected } = toCallError(error);
        if (unexpected) onError(error, call.getPath());
        callback(status);
      },
    );
  };
}

function formatAddress(host: string, port: number): string {
  return host.includes(':') && !host.startsWith('[') ? `[${host}]:${port}` : `${host}:${port}`;
}

/**
 * Serves envoy's `RateLimitService`, Sluice's `Check` and `grpc.health.v1.Health` on one
 * gRPC server. Requests are validated before handlers see them (malformed ones, bytes
 * that are no protobuf message among them, and ones beyond the descriptor limits fail
 * with INVALID_ARGUMENT); errors map through the error-code registry.
 */
export class GrpcServer {
  readonly #server: grpc.Server;
  readonly #health = new HealthService(HEALTH_SERVICE_NAMES, 'SERVING');
  readonly #options: GrpcServerOptions;
  #port: number | undefined;
  #closing: Promise<ShutdownResult> | undefined;

  /** Prefer {@link createGrpcServer}. */
  constructor(handlers: GrpcHandlers, options: GrpcServerOptions = {}) {
    this.#options = options;
    this.#server = new grpc.Server(options.serverOptions ?? {});
    const onError = options.onError ?? (() => {});
    const limits = options.descriptorLimits ?? DEFAULT_DESCRIPTOR_LIMITS;
    const rls = {
      ...RLS_SERVICE,
      ShouldRateLimit: guardMethod(RLS_SERVICE.ShouldRateLimit, 'RateLimitRequest', (buf) =>
        precheckRlsRequest(buf, limits),
      ),
    };
    const sluice = {
      ...SLUICE_SERVICE,
      Check: guardMethod(SLUICE_SERVICE.Check, 'CheckRequest', (buf) =>
        precheckCheckRequest(buf, limits),
      ),
    };
    this.#server.addService(rls, {
      ShouldRateLimit: unary<WireRlsRequest, WireRlsResponse>(async (wire, context) => {
        const request = decodeRlsRequest(wire, limits);
        const response = await handlers.shouldRateLimit(request, context);
        return encodeRlsResponse(response, request.descriptors.length);
      }, onError),
    });
    this.#server.addService(sluice, {
      Check: unary<WireCheckRequest, WireCheckResponse>(async (wire, context) => {
        const response = await handlers.check(decodeCheckRequest(wire, limits), context);
        return encodeCheckResponse(response);
      }, onError),
    });
    this.#server.addService(HEALTH_SERVICE, this.#health.implementation);
  }

  /** The bound port (useful after `listen(host, 0)`); `undefined` before `listen`. */
  get port(): number | undefined {
    return this.#port;
  }

  /**
   * Sets what the health service answers for every name: SERVING (true) or NOT_SERVING.
   * Starts serving; after `shutdown()` it stays NOT_SERVING.
   */
  setHealthy(healthy: boolean): void {
    if (this.#closing === undefined) this.#health.setAll(healthy ? 'SERVING' : 'NOT_SERVING');
  }

  /**
   * Binds `host:port` (`port` 0 picks a free one) and starts serving; resolves with the
   * bound port. Call once; IPv6 hosts may be given bare (`::1`).
   */
  listen(host: string, port: number): Promise<number> {
    return this.#bind(formatAddress(host, port));
  }

  /**
   * Serves on a unix domain socket at `path` instead of TCP (upstream's `GRPC_UDS`); the
   * file must not exist yet. Call once, instead of {@link listen}.
   */
  async listenUnix(path: string): Promise<void> {
    await this.#bind(`unix:${path}`);
  }

  #bind(address: string): Promise<number> {
    if (this.#port !== undefined || this.#closing !== undefined) {
      return Promise.reject(new Error('GrpcServer.listen() may be called once, before shutdown()'));
    }
    const credentials = this.#options.credentials ?? grpc.ServerCredentials.createInsecure();
    return new Promise((resolve, reject) => {
      this.#server.bindAsync(address, credentials, (error, bound) => {
        if (error !== null) return reject(error);
        this.#port = bound;
        resolve(bound);
      });
    });
  }

  /**
   * Shuts down gracefully: health turns NOT_SERVING (open Watch streams are told, then
   * ended), calls keep being served for `drainDelayMs`, then new calls are refused while
   * in-flight ones finish; after `shutdownTimeoutMs` the rest are cancelled (their
   * handlers' `signal` aborts). Idempotent: every call returns the same promise.
   */
  shutdown(): Promise<ShutdownResult> {
    this.#closing ??= this.#shutdown();
    return this.#closing;
  }

  async #shutdown(): Promise<ShutdownResult> {
    this.#health.setAll('NOT_SERVING');
    const drainDelayMs = this.#options.drainDelayMs ?? 0;
    if (drainDelayMs > 0) await new Promise((r) => setTimeout(r, drainDelayMs));
    this.#health.endWatches();
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.#server.forceShutdown();
        resolve({ forced: true });
      }, this.#options.shutdownTimeoutMs ?? 10_000);
      this.#server.tryShutdown(() => {
        clearTimeout(timer);
        resolve({ forced: false });
      });
    });
  }
}

/**
 * Creates the gRPC server for `handlers`; call `listen(host, port)` to serve.
 *
 * @example
 * ```ts
 * const server = createGrpcServer(handlers, { drainDelayMs: 5_000 });
 * await server.listen('0.0.0.0', 8081);
 * process.once('SIGTERM', () => void server.shutdown());
 * ```
 */
export function createGrpcServer(
  handlers: GrpcHandlers,
  options: GrpcServerOptions = {},
): GrpcServer {
  return new GrpcServer(handlers, options);
}
