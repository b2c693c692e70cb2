import { describe, expect, it } from 'vitest';
import { DEFAULT_DESCRIPTOR_LIMITS } from '../../../src/core/descriptor-limits.js';
import { PolicyError, ProtocolError } from '../../../src/core/errors.js';
import { RLS_SERVICE, SLUICE_SERVICE } from '../../../src/protocol/protos.js';
import {
  guardMethod,
  precheckCheckRequest,
  precheckRlsRequest,
  RefusedRequest,
} from '../../../src/service/grpc/request-guard.js';
import { countField, forEachField, MalformedWire } from '../../../src/service/grpc/wire-scan.js';

const rlsBytes = (r: unknown) => RLS_SERVICE.ShouldRateLimit.requestSerialize(r as never);
const checkBytes = (r: unknown) => SLUICE_SERVICE.Check.requestSerialize(r as never);
const limits = { ...DEFAULT_DESCRIPTOR_LIMITS, maxDescriptors: 3, maxDescriptorEntries: 2 };

const descriptor = (entries: number, limit = false) => ({
  entries: Array.from({ length: entries }, (_, i) => ({ key: `k${i}`, value: `v${i}` })),
  ...(limit ? { limit: { requestsPerUnit: 5, unit: 'MINUTE' } } : {}),
  hitsAddend: { value: 2 },
});

describe('counting fields on the wire', () => {
  it('agrees with the loaded .proto files on the fields the limits count', () => {
    // If a field number in request-guard.ts were wrong, these counts would be 0.
    const bytes = rlsBytes({
      domain: 'd',
      descriptors: [descriptor(2, true), descriptor(1)],
      hitsAddend: 7,
    });
    expect(() => precheckRlsRequest(bytes, limits)).not.toThrow();
    expect(() =>
      precheckRlsRequest(
        rlsBytes({ domain: 'd', descriptors: [descriptor(1), descriptor(3)] }),
        limits,
      ),
    ).toThrow('invalid descriptor: descriptors[1] has 3 entries; the limit is 2');
    expect(() =>
      precheckRlsRequest(
        rlsBytes({ domain: 'd', descriptors: Array.from({ length: 4 }, () => descriptor(1)) }),
        limits,
      ),
    ).toThrow('invalid descriptor: the request has 4 descriptors; the limit is 3');
    expect(() =>
      precheckCheckRequest(
        checkBytes({ entries: descriptor(3).entries, cost: 2, policies: ['p', 'q', 'r'] }),
        limits,
      ),
    ).toThrow('invalid descriptor: the descriptor has 3 entries; the limit is 2');
    expect(() =>
      precheckCheckRequest(
        checkBytes({ entries: descriptor(2).entries, policies: ['p', 'q', 'r'] }),
        limits,
      ),
    ).not.toThrow();
  });

  it('walks every wire type and refuses bytes that are no message', () => {
    // field 1 varint 150, field 2 fixed64, field 3 "hi", field 4 fixed32, field 1 again
    const bytes = Buffer.from(
      '089601' + '11' + '0102030405060708' + '1a026869' + '2501020304' + '0801',
      'hex',
    );
    const seen: [number, number][] = [];
    forEachField(bytes, 0, bytes.length, (field, start, end) => seen.push([field, end - start]));
    expect(seen).toEqual([
      [1, 2],
      [2, 8],
      [3, 2],
      [4, 4],
      [1, 1],
    ]);
    expect(countField(bytes, 1)).toBe(2);
    for (const [hex, why] of [
      ['0f', 'wire type 7'],
      ['08', 'truncated varint'],
      ['1a05aa', 'field 3 runs past the end of its message'],
      ['00', 'field number 0'],
      ['08ffffffffffffffffffff01', 'varint longer than 10 bytes'],
    ] as const) {
      expect(() => countField(Buffer.from(hex, 'hex'), 1), hex).toThrow(new MalformedWire(why));
    }
  });
});

describe('guardMethod', () => {
  const guarded = guardMethod(RLS_SERVICE.ShouldRateLimit, 'RateLimitRequest', (buf) =>
    precheckRlsRequest(buf, limits),
  );

  it('decodes a valid request as the method does', () => {
    const bytes = rlsBytes({ domain: 'd', descriptors: [descriptor(1)] });
    expect(guarded.requestDeserialize(bytes)).toEqual(
      RLS_SERVICE.ShouldRateLimit.requestDeserialize(bytes),
    );
  });

  it('hands on refusals instead of throwing: the limits, and bytes that are no RateLimitRequest', () => {
    const over = guarded.requestDeserialize(
      rlsBytes({ domain: 'd', descriptors: [descriptor(3)] }),
    );
    expect(over).toBeInstanceOf(RefusedRequest);
    expect((over as RefusedRequest).error).toBeInstanceOf(PolicyError);
    // wire type 7; and a descriptor whose one entry is the byte ff (the walk stops above entries)
    for (const hex of ['0f', '12030a01ff']) {
      const refused = guarded.requestDeserialize(Buffer.from(hex, 'hex'));
      expect(refused).toBeInstanceOf(RefusedRequest);
      const { error } = refused as RefusedRequest;
      expect(error).toBeInstanceOf(ProtocolError);
      expect(error.code).toBe('SLUICE_ERR_PROTOCOL_BAD_REQUEST');
      expect(error.message).toMatch(/^the request is not a valid RateLimitRequest message: /);
    }
  });
});
