/**
 * The one registry of Sluice error codes. A code is never reused for another meaning
 * once released. Adapters (HTTP, gRPC) map errors through this table and never choose a
 * status themselves. `docs/errors.md` lists every code; a test keeps the two in sync.
 */

export type ErrorFamily = 'policy' | 'store' | 'protocol' | 'overload';

export interface ErrorCodeInfo {
  readonly family: ErrorFamily;
  /** HTTP status an adapter answers with. */
  readonly httpStatus: number;
  /** gRPC status code number an adapter answers with. */
  readonly grpcStatus: number;
  /** One line saying what the code means. */
  readonly summary: string;
}

// gRPC status numbers (grpc/grpc doc/statuscodes.md).
const GRPC_INVALID_ARGUMENT = 3;
const GRPC_DEADLINE_EXCEEDED = 4;
const GRPC_ALREADY_EXISTS = 6;
const GRPC_PERMISSION_DENIED = 7;
const GRPC_RESOURCE_EXHAUSTED = 8;
const GRPC_FAILED_PRECONDITION = 9;
const GRPC_UNAVAILABLE = 14;
const GRPC_UNAUTHENTICATED = 16;

export const ERROR_CODES = Object.freeze({
  SLUICE_ERR_CONFIG_READ: {
    family: 'policy',
    httpStatus: 500,
    grpcStatus: GRPC_FAILED_PRECONDITION,
    summary:
      'A config file or directory could not be read; the message names the path and the problem.',
  },
  SLUICE_ERR_CONFIG_PARSE: {
    family: 'policy',
    httpStatus: 500,
    grpcStatus: GRPC_FAILED_PRECONDITION,
    summary: 'A policy file is not valid YAML or JSON.',
  },
  SLUICE_ERR_CONFIG_INVALID: {
    family: 'policy',
    httpStatus: 500,
    grpcStatus: GRPC_FAILED_PRECONDITION,
    summary:
      'A config file, or a service setting (environment variable or flag), is well-formed but not allowed; every issue is listed.',
  },
  SLUICE_ERR_POLICY_UNKNOWN: {
    family: 'policy',
    httpStatus: 400,
    grpcStatus: GRPC_INVALID_ARGUMENT,
    summary: 'A check named a policy that is not loaded.',
  },
  SLUICE_ERR_DESCRIPTOR_INVALID: {
    family: 'policy',
    httpStatus: 400,
    grpcStatus: GRPC_INVALID_ARGUMENT,
    summary:
      'A request has too many descriptors, or one is empty, has too many entries, an empty, duplicate or too long key, or a too long or bad value.',
  },
  SLUICE_ERR_DESCRIPTOR_UNMATCHED: {
    family: 'policy',
    httpStatus: 400,
    grpcStatus: GRPC_INVALID_ARGUMENT,
    summary: 'A check named a policy whose match entries the descriptor does not satisfy.',
  },
  SLUICE_ERR_POLICY_UNSUPPORTED: {
    family: 'policy',
    httpStatus: 500,
    grpcStatus: GRPC_FAILED_PRECONDITION,
    summary:
      'The store cannot run a policy as configured (e.g. a sliding log limit above the Redis store maximum).',
  },
  SLUICE_ERR_POLICY_CROSS_SLOT: {
    family: 'policy',
    httpStatus: 500,
    grpcStatus: GRPC_FAILED_PRECONDITION,
    summary:
      'Two policies can match one descriptor but keep their buckets in different Redis Cluster slots, and the store\'s crossSlot strategy is "reject".',
  },
  SLUICE_ERR_COST_INVALID: {
    family: 'policy',
    httpStatus: 400,
    grpcStatus: GRPC_INVALID_ARGUMENT,
    summary: 'A cost is not a non-negative safe integer.',
  },
  SLUICE_ERR_COST_EXCEEDS_CAPACITY: {
    family: 'policy',
    httpStatus: 400,
    grpcStatus: GRPC_INVALID_ARGUMENT,
    summary: "A cost is larger than the policy's capacity, so it could never be admitted.",
  },
  SLUICE_ERR_REQUEST_ID_INVALID: {
    family: 'policy',
    httpStatus: 400,
    grpcStatus: GRPC_INVALID_ARGUMENT,
    summary: 'A request id is empty, longer than 128 characters or not a well-formed string.',
  },
  SLUICE_ERR_TIMEOUT_INVALID: {
    family: 'policy',
    httpStatus: 400,
    grpcStatus: GRPC_INVALID_ARGUMENT,
    summary: "A check's timeoutMs is not a positive number.",
  },
  SLUICE_ERR_LOCAL_INVALID: {
    family: 'policy',
    httpStatus: 500,
    grpcStatus: GRPC_FAILED_PRECONDITION,
    summary:
      "A policy's local bucket (local: rate, period, burst) or the local stages' options (key bound, over-limit cache bytes) are not allowed, e.g. a local burst below the policy's cost.",
  },
  SLUICE_ERR_BATCH_INVALID: {
    family: 'policy',
    httpStatus: 500,
    grpcStatus: GRPC_FAILED_PRECONDITION,
    summary:
      "A policy's token batching (batch: size, ttl) is not allowed, e.g. a size above the policy's capacity, or batching on a shadow policy.",
  },
  SLUICE_ERR_SETTLE_INVALID: {
    family: 'policy',
    httpStatus: 500,
    grpcStatus: GRPC_FAILED_PRECONDITION,
    summary:
      "A policy's settle block (settle: maxDebt) is not allowed, e.g. a negative or fractional maxDebt.",
  },
  SLUICE_ERR_RESERVATION_INVALID: {
    family: 'policy',
    httpStatus: 400,
    grpcStatus: GRPC_INVALID_ARGUMENT,
    summary:
      "A reserve's ttlMs is not allowed, or a settle's reservation id is not one Sluice made, or names a policy that is no longer loaded.",
  },
  SLUICE_ERR_RESERVATION_EXPIRED: {
    family: 'policy',
    httpStatus: 409,
    grpcStatus: GRPC_FAILED_PRECONDITION,
    summary:
      "A settle came after its reservation's ttl: the reservation stays charged at its estimate and can no longer be settled.",
  },
  SLUICE_ERR_RESERVE_UNSUPPORTED: {
    family: 'policy',
    httpStatus: 500,
    grpcStatus: GRPC_FAILED_PRECONDITION,
    summary:
      'A reserve or settle was asked of a limiter whose store cannot settle (it has no settle method).',
  },
  SLUICE_ERR_STORE_UNAVAILABLE: {
    family: 'store',
    httpStatus: 503,
    grpcStatus: GRPC_UNAVAILABLE,
    summary:
      'The store could not be reached or answered with an error; nothing is known to be applied.',
  },
  SLUICE_ERR_STORE_TIMEOUT: {
    family: 'store',
    httpStatus: 503,
    grpcStatus: GRPC_DEADLINE_EXCEEDED,
    summary:
      'The store did not answer within the deadline; the operation may or may not have been applied.',
  },
  SLUICE_ERR_STORE_STATE_CORRUPT: {
    family: 'store',
    httpStatus: 503,
    grpcStatus: GRPC_UNAVAILABLE,
    summary:
      'A bucket key holds a value that is not Sluice state (wrong type or format); it is left untouched.',
  },
  SLUICE_ERR_STORE_CROSS_SLOT: {
    family: 'store',
    httpStatus: 503,
    grpcStatus: GRPC_UNAVAILABLE,
    summary:
      'A batch spans several Redis Cluster slots and the store\'s crossSlot strategy is "reject", or it holds a request that charges denials (decide those independently); nothing was applied.',
  },
  SLUICE_ERR_STORE_REPLICA: {
    family: 'store',
    httpStatus: 503,
    grpcStatus: GRPC_UNAVAILABLE,
    summary:
      'The Redis server is a replica (its primary named), or the client is set to read from replicas: the store decides only on a primary, never on a copy that may be stale.',
  },
  SLUICE_ERR_STORE_NOT_REPLICATED: {
    family: 'store',
    httpStatus: 503,
    grpcStatus: GRPC_UNAVAILABLE,
    summary:
      'Strict replicated acknowledgement: a consume was applied on the primary but its replicas did not acknowledge it in time, so it is not admitted (its units stay charged).',
  },
  SLUICE_ERR_STORE_CLOSED: {
    family: 'store',
    httpStatus: 503,
    grpcStatus: GRPC_UNAVAILABLE,
    summary: 'The store was used after close().',
  },
  SLUICE_ERR_HTTP_CONFIG_INVALID: {
    family: 'policy',
    httpStatus: 500,
    grpcStatus: GRPC_FAILED_PRECONDITION,
    summary:
      'HTTP middleware options are invalid (trusted proxies, route cost or name, retry settings), or a route has no template.',
  },
  SLUICE_ERR_OVERLOAD_CONFIG_INVALID: {
    family: 'policy',
    httpStatus: 500,
    grpcStatus: GRPC_FAILED_PRECONDITION,
    summary:
      "Admission boundary options (limit, shares, queue, breaker) or a retrying client's throttle or retry budget are invalid; every issue is listed.",
  },
  SLUICE_ERR_OVERLOAD_SHED: {
    family: 'overload',
    httpStatus: 503,
    grpcStatus: GRPC_UNAVAILABLE,
    summary:
      "Shed: the request's criticality has no capacity left, or a more critical request took its place in the queue.",
  },
  SLUICE_ERR_OVERLOAD_QUEUE_FULL: {
    family: 'overload',
    httpStatus: 503,
    grpcStatus: GRPC_UNAVAILABLE,
    summary: 'The admission queue is full and holds nothing less critical than the request.',
  },
  SLUICE_ERR_OVERLOAD_QUEUE_TIMEOUT: {
    family: 'overload',
    httpStatus: 503,
    grpcStatus: GRPC_UNAVAILABLE,
    summary: "The request waited the admission queue's longest wait without getting capacity.",
  },
  SLUICE_ERR_OVERLOAD_DEADLINE: {
    family: 'overload',
    httpStatus: 503,
    grpcStatus: GRPC_UNAVAILABLE,
    summary:
      "The request's deadline falls before its estimated turn in the queue; it is refused at once.",
  },
  SLUICE_ERR_OVERLOAD_BREAKER_OPEN: {
    family: 'overload',
    httpStatus: 503,
    grpcStatus: GRPC_UNAVAILABLE,
    summary: 'The circuit breaker is open (or its half-open probes are all taken).',
  },
  SLUICE_ERR_OVERLOAD_THROTTLED: {
    family: 'overload',
    httpStatus: 503,
    grpcStatus: GRPC_UNAVAILABLE,
    summary:
      'The retrying client refused the request locally: the backend has been refusing most requests (adaptive throttling).',
  },
  SLUICE_ERR_QUOTA_CONFIG_INVALID: {
    family: 'policy',
    httpStatus: 500,
    grpcStatus: GRPC_FAILED_PRECONDITION,
    summary:
      'Quota controller or agent options are invalid (budgets, refresh, lease TTL, fallback); every issue is listed.',
  },
  SLUICE_ERR_QUOTA_NOT_LEADER: {
    family: 'store',
    httpStatus: 503,
    grpcStatus: GRPC_UNAVAILABLE,
    summary:
      'This quota controller does not lead (or just stopped leading); the client should try the next controller.',
  },
  SLUICE_ERR_QUOTA_DUPLICATE_AGENT: {
    family: 'protocol',
    httpStatus: 409,
    grpcStatus: GRPC_ALREADY_EXISTS,
    summary:
      'A quota stream was opened under an agent name that already has a live stream; the first keeps its lease, the second is refused.',
  },
  SLUICE_ERR_QUOTA_UNAUTHENTICATED: {
    family: 'protocol',
    httpStatus: 401,
    grpcStatus: GRPC_UNAUTHENTICATED,
    summary:
      'A quota stream came without credentials the controller knows (no verified client certificate, no known bearer token).',
  },
  SLUICE_ERR_QUOTA_PERMISSION_DENIED: {
    family: 'protocol',
    httpStatus: 403,
    grpcStatus: GRPC_PERMISSION_DENIED,
    summary:
      "A quota stream's credentials do not allow the agent name or domain it claims (or its certificate is not on the allow-list).",
  },
  SLUICE_ERR_QUOTA_AGENTS_INSECURE: {
    family: 'policy',
    httpStatus: 500,
    grpcStatus: GRPC_FAILED_PRECONDITION,
    summary:
      'A quota controller listening beyond loopback was given no agent authentication (mTLS or tokens) and not --insecure-agents; it does not start.',
  },
  SLUICE_ERR_PROTOCOL_BAD_REQUEST: {
    family: 'protocol',
    httpStatus: 400,
    grpcStatus: GRPC_INVALID_ARGUMENT,
    summary: 'An HTTP or gRPC request is malformed.',
  },
  SLUICE_ERR_QUOTA_CAP_EXCEEDED: {
    family: 'protocol',
    httpStatus: 429,
    grpcStatus: GRPC_RESOURCE_EXHAUSTED,
    summary:
      'A quota controller refused an RLQS stream or message whole: too many agents, buckets in one message or per agent, or reports per second; the message names the cap and its value.',
  },
} satisfies Record<string, ErrorCodeInfo>);

export type ErrorCode = keyof typeof ERROR_CODES;
