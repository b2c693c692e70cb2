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

/** The store could not decide: unreachable, timed out, failed script (UNAVAILABLE). */
export class StoreError extends SluiceError {
  constructor(code: ErrorCode, message: string, options: SluiceErrorOptions = {}) {
    super(code, message, options);
    this.name = 'StoreError';
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
