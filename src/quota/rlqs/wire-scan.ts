import { CAP_FLAGS, type CapReason, type CapRefusal, type PeerCaps } from './peer-caps.js';
import { ProtocolError } from '../../core/errors.js';

/**
 * A message refused by {@link scanReports} before it was decoded: what the deserializer
 * hands the stream instead of the message.
 */
export interface OverCaps {
  readonly overCaps: CapRefusal;
}

/**
 * Checks an encoded `RateLimitQuotaUsageReports` against the count, pair and byte caps
 * by reading only its tags and length prefixes, so that a message over them costs at
 * most `maxBucketsPerMessage` × `maxBucketPairs` steps and is never decoded: decoding
 * 50,000 buckets takes seconds of event loop on a busy machine, long enough to lose the
 * leader's term. `undefined` when within the caps, or when the bytes are not a message
 * this reads (the decoder then says what is wrong).
 *
 * Wire shape (rlqs.proto): reports { 1: domain, 2: repeated usage }; usage { 1: bucket_id };
 * bucket_id { 1: repeated map entry { 1: key, 2: value } }.
 */
export function scanReports(buf: Uint8Array, caps: PeerCaps): OverCaps | undefined {
  let usages = 0;
  try {
    return fields(buf, 0, buf.length, (field, start, end) => {
      if (field !== 2) return undefined;
      if (++usages > caps.maxBucketsPerMessage)
        return over(
          'buckets-per-message',
          'SLUICE_ERR_QUOTA_CAP_EXCEEDED',
          `more than ${caps.maxBucketsPerMessage} buckets in one message, above the cap ${CAP_FLAGS.maxBucketsPerMessage} ${caps.maxBucketsPerMessage}`,
        );
      const at = `bucket_quota_usages[${usages - 1}]`;
      return fields(buf, start, end, (f, s, e) =>
        f === 1 ? bucketId(buf, s, e, caps, at) : undefined,
      );
    });
  } catch {
    return undefined;
  }
}

function bucketId(
  buf: Uint8Array,
  start: number,
  end: number,
  caps: PeerCaps,
  at: string,
): OverCaps | undefined {
  let pairs = 0;
  return fields(buf, start, end, (field, s, e) => {
    if (field !== 1) return undefined;
    if (++pairs > caps.maxBucketPairs)
      return over(
        'bucket-pairs',
        'SLUICE_ERR_PROTOCOL_BAD_REQUEST',
        `${at} has more than ${caps.maxBucketPairs} pairs, above the cap ${CAP_FLAGS.maxBucketPairs} ${caps.maxBucketPairs}`,
      );
    return fields(buf, s, e, (f, ks, ke) => {
      const bytes = ke - ks;
      if (f === 1 && bytes > caps.maxBucketKeyBytes)
        return over(
          'bucket-key-bytes',
          'SLUICE_ERR_PROTOCOL_BAD_REQUEST',
          `${at} has a key of ${bytes} bytes, above the cap ${CAP_FLAGS.maxBucketKeyBytes} ${caps.maxBucketKeyBytes}`,
        );
      if (f === 2 && bytes > caps.maxBucketValueBytes)
        return over(
          'bucket-value-bytes',
          'SLUICE_ERR_PROTOCOL_BAD_REQUEST',
          `${at} has a value of ${bytes} bytes, above the cap ${CAP_FLAGS.maxBucketValueBytes} ${caps.maxBucketValueBytes}`,
        );
      return undefined;
    });
  });
}

function over(
  reason: CapReason,
  code: 'SLUICE_ERR_QUOTA_CAP_EXCEEDED' | 'SLUICE_ERR_PROTOCOL_BAD_REQUEST',
  what: string,
): OverCaps {
  return { overCaps: { reason, error: new ProtocolError(code, `refused whole: ${what}`) } };
}

/**
 * Calls `each` with the field number and payload range of every length-delimited field
 * in [start, end), skipping the others; stops at the first answer. Throws on bytes that
 * are not protobuf (the caller then leaves them to the decoder).
 */
function fields(
  buf: Uint8Array,
  start: number,
  end: number,
  each: (field: number, start: number, end: number) => OverCaps | undefined,
): OverCaps | undefined {
  let i = start;
  const varint = (): number => {
    let n = 0;
    for (let shift = 0; shift < 64; shift += 7) {
      if (i >= end) throw new RangeError('truncated varint');
      const b = buf[i++]!;
      n += (b & 0x7f) * 2 ** shift;
      if (b < 0x80) return n;
    }
    throw new RangeError('varint too long');
  };
  while (i < end) {
    const tag = varint();
    const wire = tag % 8;
    const field = Math.floor(tag / 8);
    if (wire === 0) varint();
    else if (wire === 1) i += 8;
    else if (wire === 5) i += 4;
    else if (wire === 2) {
      const len = varint();
      if (i + len > end) throw new RangeError('truncated field');
      const found = each(field, i, i + len);
      if (found !== undefined) return found;
      i += len;
    } else throw new RangeError(`wire type ${wire}`);
  }
  if (i > end) throw new RangeError('truncated field');
  return undefined;
}
