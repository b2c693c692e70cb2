import type {
  NativeCheckRequest,
  NativeCheckResponse,
  RlsRequest,
  RlsResponse,
} from '../../protocol/messages.js';

/** What the transport knows about a call, beyond its request. */
export interface CallContext {
  /** Aborted when the client cancels the call or the server is force-shut down. */
  readonly signal: AbortSignal;
  /** Milliseconds left until the client's deadline when the call arrived; absent without one. */
  readonly timeoutMs?: number;
  /**
   * The caller's `x-request-id` (an HTTP header or gRPC metadata), for the decision log;
   * absent when not sent or not a well-formed id (see `requestIdOf`).
   */
  readonly requestId?: string;
  /** Reads a request header (gRPC metadata) by lower-case name, e.g. `traceparent`. */
  readonly header?: (name: string) => string | undefined;
}

/** The service core the gRPC server calls. Over limit is an answer, never a rejection. */
export interface GrpcHandlers {
  /** envoy's `ShouldRateLimit`. Throw a `SluiceError` to answer with its registry status. */
  shouldRateLimit(request: RlsRequest, context: CallContext): Promise<RlsResponse>;
  /** Sluice's `Check`. Throw a `SluiceError` to answer with its registry status. */
  check(request: NativeCheckRequest, context: CallContext): Promise<NativeCheckResponse>;
}
