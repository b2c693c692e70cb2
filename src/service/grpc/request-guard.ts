import type * as grpc from '@grpc/grpc-js';
import {
  checkDescriptorCount,
  checkEntryCount,
  type DescriptorLimits,
} from '../../core/descriptor-limits.js';
import { ProtocolError, SluiceError } from '../../core/errors.js';
import { countField, forEachField } from './wire-scan.js';

/**
 * What a guarded method hands its handler instead of a request it refused: the handler
 * answers with `error` (INVALID_ARGUMENT). grpc-js answers every error thrown while
 * deserializing with INTERNAL, so a guarded deserializer never throws.
 */
export class RefusedRequest {
  constructor(readonly error: SluiceError) {}
}

// Field numbers of the repeated fields the limits count (rls.proto, ratelimit.proto,
// sluice.proto); a test checks them against the loaded definitions.
const RLS_DESCRIPTORS = 2;
const RLS_DESCRIPTOR_ENTRIES = 1;
const CHECK_ENTRIES = 1;

/**
 * Checks a serialized envoy `RateLimitRequest` against the descriptor count and entry
 * count limits without decoding it. Throws `PolicyError` (`SLUICE_ERR_DESCRIPTOR_INVALID`)
 * as the decoded checks would, or `MalformedWire`.
 */
export function precheckRlsRequest(buf: Uint8Array, limits: DescriptorLimits): void {
  checkDescriptorCount(countField(buf, RLS_DESCRIPTORS), limits);
  let i = 0;
  forEachField(buf, 0, buf.length, (field, start, end) => {
    if (field !== RLS_DESCRIPTORS) return;
    const entries = countField(buf, RLS_DESCRIPTOR_ENTRIES, start, end);
    checkEntryCount(entries, `descriptors[${i++}]`, limits);
  });
}

/** {@link precheckRlsRequest} for a serialized `sluice.v1.CheckRequest`. */
export function precheckCheckRequest(buf: Uint8Array, limits: DescriptorLimits): void {
  checkEntryCount(countField(buf, CHECK_ENTRIES), 'the descriptor', limits);
}

/**
 * `method` with a deserializer that runs `precheck` on the bytes first and never throws:
 * a request that fails `precheck` or is not a valid `typeName` message is handed on as a
 * {@link RefusedRequest}, carrying the precheck's `SluiceError` or a `ProtocolError`
 * (`SLUICE_ERR_PROTOCOL_BAD_REQUEST`) saying the bytes are not a `typeName`.
 */
export function guardMethod<Req, Res>(
  method: grpc.MethodDefinition<Req, Res>,
  typeName: string,
  precheck: (buf: Buffer) => void,
): grpc.MethodDefinition<Req | RefusedRequest, Res> {
  return {
    ...method,
    // Clients serialize; a server never serializes a request, refused or not.
    requestSerialize: method.requestSerialize as grpc.serialize<Req | RefusedRequest>,
    requestDeserialize: (buf: Buffer): Req | RefusedRequest => {
      try {
        precheck(buf);
        return method.requestDeserialize(buf);
      } catch (error) {
        if (error instanceof SluiceError) return new RefusedRequest(error);
        const detail = error instanceof Error ? `: ${error.message}` : '';
        return new RefusedRequest(
          new ProtocolError(
            'SLUICE_ERR_PROTOCOL_BAD_REQUEST',
            `the request is not a valid ${typeName} message${detail}`,
            { cause: error },
          ),
        );
      }
    },
  };
}
