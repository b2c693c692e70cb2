import * as grpc from '@grpc/grpc-js';
import { ERROR_CODES } from '../core/error-codes.js';
import { SluiceError } from '../core/errors.js';

import { ERROR_CODE_METADATA_KEY } from './metadata.js';

/** The message sent for errors that are not `SluiceError`s: their text stays in the server. */
export const INTERNAL_ERROR_MESSAGE = 'internal error';

/**
 * Maps a failed call to the gRPC status the client sees. A `SluiceError` answers with
 * its registry `grpcStatus`, its message and its code in {@link ERROR_CODE_METADATA_KEY};
 * anything else answers `INTERNAL` with {@link INTERNAL_ERROR_MESSAGE}, so no internal
 * detail leaks, and returns `unexpected: true` for the caller to report it.
 */
export function toCallError(error: unknown): {
  readonly status: Partial<grpc.StatusObject>;
  readonly unexpected: boolean;
} {
  if (error instanceof SluiceError) {
    const metadata = new grpc.Metadata();
    metadata.set(ERROR_CODE_METADATA_KEY, error.code);
    return {
      status: { code: ERROR_CODES[error.code].grpcStatus, details: error.message, metadata },
      unexpected: false,
    };
  }
  return {
    status: { code: grpc.status.INTERNAL, details: INTERNAL_ERROR_MESSAGE },
    unexpected: true,
  };
}
