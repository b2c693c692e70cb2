import { ERROR_CODES, type ErrorCode, type ErrorFamily } from './error-codes.js';
import type { Status } from './status.js';

export interface SluiceErrorOptions {
  readonly cause?: unknown;
}

/** Base class of every error Sluice throws; `code` is stable and listed in docs/errors.md. */
export class SluiceError extends Error {
  readonly code: ErrorCode;

  constructor(code: ErrorCode, message: string, options: SluiceErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'SluiceError';
    this.code = code;
  }

  get family(): ErrorFamily {
    return ERROR_CODES[this.code].family;
  }

  /** The decision status this error stands for. */
  get status(): Status {
    return this.family === 'store' || this.family === 'overload' ? 'UNAVAILABLE' : 'INVALID_POLICY';
  }
}

/** A single problem found in a policy file, with where it is. */
export interface PolicyIssue {
  /** The file the issue is in, when the policies came from a file. */
  readonly file?: string;
  /** Path inside the document, e.g. `policies[0].burst`; empty for the document root. */
  readonly path: string;
  readonly message: string;
  /** A finer code for the issue, when it has one (e.g. `SLUICE_ERR_LOCAL_INVALID`). */
  readonly code?: ErrorCode;
}

/** Configuration, descriptor or cost errors: the request or policy is wrong (INVALID_POLICY). */
export class PolicyError extends SluiceError {
  /** Every problem found, in document order (config errors); one entry otherwise. */
  readonly issues: readonly PolicyIssue[];

  constructor(
    code: ErrorCode,
    message: string,
    options: SluiceErrorOptions & { issues?: readonly PolicyIssue[] } = {},
  ) {
    super(code, message, options);
    this.name = 'PolicyError';
    this.issues = options.issues ?? [{ path: '', message }];
  }
}

/**
 * Why a store call failed, finer than the error code, for counters and logs: a small
 * fixed set (metric labels), never free text.
 */
export type StoreFailureReason =
  /** No answer within the deadline. */
  | 'timeout'
  /** Not connected, connection refused, reset or closed. */
  | 'connection'
  /** Redis refused the credentials or the command (`NOAUTH`, `WRONGPASS`, `NOPERM`). */
  | 'auth'
  /** Redis is out of memory and refuses writes (`OOM`). */
  | 'oom'
  /** A bucket key holds something else (`WRONGTYPE`, or a value that is not Sluice state). */
  | 'wrongtype'
  /** The node is a replica (`READONLY`, or its `ROLE`), e.g. after a failover. */
  | 'readonly'
  /** Strict replicated acknowledgement: a consume was not acknowledged by its replicas in time. */
  | 'replication'
  /** Redis is loading its data set (`LOADING`) or busy with a script (`BUSY`). */
  | 'busy'
  /** The cluster cannot serve the slot (`CLUSTERDOWN`, `MASTERDOWN`, `TRYAGAIN`). */
  | 'cluster'
  /** Any other error reply, or a reply the scripts never send. */
  | 'script'
  /** Too many calls already waiting (`maxInFlight`). */
  | 'overloaded'
  /** The store was closed. */
  | 'closed'
  /** A batch across Redis Cluster slots under `crossSlot: "reject"`. */
  | 'cross_slot';

const REASON_OF_CODE: Partial<Record<ErrorCode, StoreFailureReason>> = {
  SLUICE_ERR_STORE_TIMEOUT: 'timeout',
  SLUICE_ERR_STORE_STATE_CORRUPT: 'wrongtype',
  SLUICE_ERR_STORE_CLOSED: 'closed',
  SLUICE_ERR_STORE_REPLICA: 'readonly',
  SLUICE_ERR_STORE_NOT_REPLICATED: 'replication',
  SLUICE_ERR_STORE_CROSS_SLOT: 'cross_slot',
};

/** The store could not decide: unreachable, timed out, failed script (UNAVAILABLE). */
export class StoreError extends SluiceError {
  /** Why, as the store saw it; without one given, from the code (`script` for UNAVAILABLE). */
  readonly reason: StoreFailureReason;

  constructor(
    code: ErrorCode,
    message: string,
    options: SluiceErrorOptions & { reason?: StoreFailureReason } = {},
  ) {
    super(code, message, options);
    this.name = 'StoreError';
    this.reason = options.reason ?? REASON_OF_CODE[code] ?? 'script';
  }
}

/** A malformed HTTP or gRPC request. */
export class ProtocolError extends SluiceError {
  constructor(code: ErrorCode, message: string, options: SluiceErrorOptions = {}) {
    super(code, message, options);
    this.name = 'ProtocolError';
  }
}

/** Formats an issue as `file: path: message`, leaving out the parts that are absent. */
export function formatIssue(issue: PolicyIssue): string {
  return [issue.file, issue.path, issue.message]
    .filter((p) => p !== undefined && p !== '')
    .join(': ');
}
