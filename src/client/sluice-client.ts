import * as grpc from '@grpc/grpc-js';
import type { Decision, DecisionPath } from '../core/decision.js';
import type { DescriptorEntry, DescriptorInput } from '../core/descriptor.js';
import { PolicyError, ProtocolError } from '../core/errors.js';
import type { Status } from '../core/status.js';
import { SLUICE_SERVICE } from '../protocol/protos.js';
import type { NativeCheckResponse } from '../protocol/messages.js';
import type { WireCheckRequest, WireCheckResponse, WireDecision } from '../protocol/wire.js';
import { fromServiceError, isUndecided } from './service-error.js';

/** What the client does when the service cannot decide (unreachable, timed out). */
export type ClientFailureMode = 'open' | 'closed';

/** Which path produced a {@link ClientCheckResult}: the service, or the client's failure mode. */
export type ClientPath = 'service' | 'fail-open' | 'fail-closed';

export interface SluiceClientOptions {
  /** The service's gRPC address, `host:port`. */
  readonly address: string;
  /** Per-call deadline in ms, enforced as the gRPC deadline. @default 50 */
  readonly timeoutMs?: number;
  /** Applied when the service is unreachable or misses the deadline. @default 'closed' */
  readonly failureMode?: ClientFailureMode;
  /** @default grpc.credentials.createInsecure() */
  readonly credentials?: grpc.ChannelCredentials;
  /** Passed to the channel as is. */
  readonly channelOptions?: grpc.ChannelOptions;
}

export interface ClientCheckOptions {
  /** Units to consume in every matched policy; absent: the policies' own cost rules. */
  readonly cost?: number;
  /** Makes the consume idempotent within the store's dedup window. */
  readonly requestId?: string;
  /** Check only these policies by name. */
  readonly policies?: readonly string[];
  /** This call's deadline in ms, instead of the client's. */
  readonly timeoutMs?: number;
}

/**
 * The service's answer (the limiter's `CheckResult`, flattened as the service sends it),
 * or the client's failure mode when the service did not decide. Times are whole ms.
 */
export interface ClientCheckResult extends NativeCheckResponse {
  /** `service` when the service decided; otherwise which failure mode answered. */
  readonly path: ClientPath;
  /** On a failure path: the gRPC status name and message that caused it. */
  readonly failure?: { readonly code: string; readonly message: string };
}

type UnaryCheck = (
  request: WireCheckRequest,
  metadata: grpc.Metadata,
  options: grpc.CallOptions,
  callback: (error: grpc.ServiceError | null, response?: WireCheckResponse) => void,
) => grpc.ClientUnaryCall;

const SluiceGrpcClient = grpc.makeGenericClientConstructor(SLUICE_SERVICE, 'Sluice');

const DEFAULT_TIMEOUT_MS = 50;

function timeout(ms: unknown, what: string): number {
  if (typeof ms !== 'number' || !(ms > 0) || !Number.isFinite(ms)) {
    throw new PolicyError(
      'SLUICE_ERR_TIMEOUT_INVALID',
      `${what} must be a positive finite number of ms, got ${String(ms)}`,
    );
  }
  return ms;
}

const PATHS: Readonly<Record<string, DecisionPath>> = {
  STORE: 'store',
  FAIL_OPEN: 'fail-open',
  FAIL_CLOSED: 'fail-closed',
  STALE: 'stale',
  SHADOW: 'shadow',
  LOCAL: 'local',
  CACHE: 'cache',
  BATCH: 'batch',
  LEASE: 'lease',
};

const STATUSES: ReadonlySet<string> = new Set<Status>([
  'OK',
  'OVER_LIMIT',
  'UNAVAILABLE',
  'INVALID_POLICY',
]);

function malformed(what: string): ProtocolError {
  return new ProtocolError('SLUICE_ERR_PROTOCOL_BAD_REQUEST', `malformed CheckResponse: ${what}`);
}

function status(s: string, at: string): Status {
  if (!STATUSES.has(s)) throw malformed(`${at}status is ${s}`);
  return s as Status;
}

function decision(d: WireDecision, i: number): Decision {
  const path = PATHS[d.path];
  if (path === undefined) throw malformed(`decisions[${i}].path is ${d.path}`);
  return {
    allowed: d.allowed,
    status: status(d.status, `decisions[${i}].`),
    limit: d.limit,
    remaining: d.remaining,
    retryAfterMs: d.retryAfterMs,
    resetAfterMs: d.resetAfterMs,
    ...(d.delayMs === undefined || d.delayMs === null ? {} : { delayMs: d.delayMs }),
    policy: d.policy,
    path,
  };
}

function fromWire(r: WireCheckResponse): ClientCheckResult {
  return {
    allowed: r.allowed,
    status: status(r.status, ''),
    retryAfterMs: r.retryAfterMs,
    resetAfterMs: r.resetAfterMs,
    remaining: r.remaining,
    limit: r.limit,
    ...(r.policy === '' ? {} : { policy: r.policy }),
    ...(r.delayMs === undefined || r.delayMs === null ? {} : { delayMs: r.delayMs }),
    decisions: r.decisions.map(decision),
    path: 'service',
  };
}

function entries(descriptor: DescriptorInput): DescriptorEntry[] {
  // The service validates (keys, duplicates, lengths); the client only reshapes.
  return Array.isArray(descriptor)
    ? descriptor.map(({ key, value }: DescriptorEntry) => ({ key, value }))
    : Object.entries(descriptor).map(([key, value]) => ({ key, value }));
}

/**
 * A client of `sluice serve`'s native gRPC API (`sluice.v1.Sluice/Check`) over one
 * reused channel. Over limit is an answer; a rejected request (`INVALID_ARGUMENT` and
 * other errors the service reports) rejects with the service's error; a service that
 * is unreachable or misses the deadline is answered by the client's failure mode.
 */
export class SluiceClient {
  readonly address: string;
  readonly timeoutMs: number;
  readonly failureMode: ClientFailureMode;
  readonly #client: grpc.Client;
  readonly #check: UnaryCheck;
  #closed = false;

  constructor(options: SluiceClientOptions) {
    if (typeof options.address !== 'string' || options.address.length === 0) {
      throw new TypeError('SluiceClient: address must be a non-empty "host:port"');
    }
    const failureMode = options.failureMode ?? 'closed';
    if (failureMode !== 'open' && failureMode !== 'closed') {
      throw new TypeError(
        `SluiceClient: failureMode must be 'open' or 'closed', got ${String(failureMode)}`,
      );
    }
    this.address = options.address;
    this.timeoutMs = timeout(options.timeoutMs ?? DEFAULT_TIMEOUT_MS, 'timeoutMs');
    this.failureMode = failureMode;
    this.#client = new SluiceGrpcClient(
      options.address,
      options.credentials ?? grpc.credentials.createInsecure(),
      options.channelOptions,
    );
    this.#check = (this.#client as unknown as Record<'Check', UnaryCheck>).Check.bind(this.#client);
  }

  /** The one channel every call goes over. */
  get channel(): ReturnType<grpc.Client['getChannel']> {
    return this.#client.getChannel();
  }

  /**
   * Resolves once the channel is connected; rejects after `timeoutMs` (default 5 s).
   * Optional: a check connects on demand, but the first one then pays the handshake
   * out of its deadline.
   */
  ready(timeoutMs = 5_000): Promise<void> {
    const deadline = Date.now() + timeout(timeoutMs, 'timeoutMs');
    return new Promise((resolve, reject) =>
      this.#client.waitForReady(deadline, (error) =>
        error === undefined || error === null ? resolve() : reject(error),
      ),
    );
  }

  /**
   * Checks one request. Resolves with the service's decision (`path: 'service'`) or,
   * when the service is unreachable or misses the deadline, the failure mode's
   * (`fail-open`: allowed, `OK`; `fail-closed`: denied, `UNAVAILABLE`). Rejects with
   * the service's `PolicyError`/`ProtocolError` for invalid input, and with a
   * `PolicyError` before sending a cost the wire cannot carry faithfully (negative, not
   * a safe integer) or an invalid `timeoutMs`.
   */
  check(descriptor: DescriptorInput, options: ClientCheckOptions = {}): Promise<ClientCheckResult> {
    try {
      if (this.#closed) throw new Error('SluiceClient: check() after close()');
      const timeoutMs =
        options.timeoutMs === undefined ? this.timeoutMs : timeout(options.timeoutMs, 'timeoutMs');
      const request: WireCheckRequest = {
        entries: entries(descriptor),
        requestId: options.requestId ?? '',
        policies: [...(options.policies ?? [])],
      };
      if (options.cost !== undefined) {
        // uint64 on the wire, and protobufjs silently turns a negative, fractional or NaN
        // cost into 0 or a truncation (a read instead of a consume), so refuse it here
        // with the limiter's code and message; the service cannot see the mistake.
        if (
          typeof options.cost !== 'number' ||
          !Number.isSafeInteger(options.cost) ||
          options.cost < 0
        ) {
          throw new PolicyError(
            'SLUICE_ERR_COST_INVALID',
            `cost must be a non-negative safe integer, got ${String(options.cost)}`,
          );
        }
        request.cost = options.cost;
      }
      return new Promise((resolve, reject) => {
        this.#check(
          request,
          new grpc.Metadata(),
          { deadline: Date.now() + timeoutMs },
          (error, response) => {
            try {
              if (error === null) {
                if (response === undefined) throw malformed('empty');
                resolve(fromWire(response));
              } else if (isUndecided(error)) resolve(this.#failure(error));
              else reject(fromServiceError(error));
            } catch (e) {
              reject(e as Error);
            }
          },
        );
      });
    } catch (e) {
      return Promise.reject(e as Error);
    }
  }

  /** Closes the channel. Calls already in flight finish; later checks reject. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#client.close();
  }

  #failure(error: grpc.ServiceError): ClientCheckResult {
    const open = this.failureMode === 'open';
    return {
      allowed: open,
      status: open ? 'OK' : 'UNAVAILABLE',
      retryAfterMs: 0,
      resetAfterMs: 0,
      remaining: 0,
      limit: 0,
      decisions: [],
      path: open ? 'fail-open' : 'fail-closed',
      failure: {
        code: grpc.status[error.code] ?? String(error.code),
        message: error.details || error.message,
      },
    };
  }
}
