import * as grpc from '@grpc/grpc-js';
import { ERROR_CODES, type ErrorCode } from '../core/error-codes.js';
import { PolicyError, ProtocolError, StoreError, type SluiceError } from '../core/errors.js';
import { ERROR_CODE_METADATA_KEY } from '../protocol/metadata.js';

/** gRPC statuses that mean "the service did not decide": the failure mode applies. */
const UNDECIDED: ReadonlySet<number> = new Set([
  grpc.status.UNAVAILABLE,
  grpc.status.DEADLINE_EXCEEDED,
]);

/** Whether a failed call leaves the decision to the client's failure mode. */
export function isUndecided(error: grpc.ServiceError): boolean {
  return UNDECIDED.has(error.code);
}

function isErrorCode(v: unknown): v is ErrorCode {
  return typeof v === 'string' && Object.hasOwn(ERROR_CODES, v);
}

/**
 * Rebuilds the error the service answered with: its message, and its code from the
 * `sluice-error-code` trailer (a `PolicyError`, `ProtocolError` or `StoreError` by the
 * code's family). A status without a Sluice code (e.g. `INTERNAL`, `UNIMPLEMENTED` from
 * something that is not Sluice) becomes a `ProtocolError` naming the gRPC status.
 * The original `ServiceError` is the `cause`.
 */
export function fromServiceError(error: grpc.ServiceError): SluiceError {
  const raw = error.metadata?.get(ERROR_CODE_METADATA_KEY)[0];
  const message = error.details || error.message;
  const options = { cause: error };
  if (isErrorCode(raw)) {
    switch (ERROR_CODES[raw].family) {
      case 'policy':
        return new PolicyError(raw, message, options);
      case 'store':
        return new StoreError(raw, message, options);
      case 'protocol':
        return new ProtocolError(raw, message, options);
    }
  }
  return new ProtocolError(
    'SLUICE_ERR_PROTOCOL_BAD_REQUEST',
    `service answered ${grpc.status[error.code] ?? error.code}: ${message}`,
    options,
  );
}
