import {
  checkDescriptorCount,
  checkEntryCount,
  DEFAULT_DESCRIPTOR_LIMITS,
  type DescriptorLimits,
} from '../../core/descriptor-limits.js';
import { ProtocolError } from '../../core/errors.js';
import { decodeRlsRequest } from '../grpc/decode.js';
import { encodeRlsResponse } from '../grpc/encode.js';
import type { JsonValue, RlsRequest, RlsResponse } from '../../protocol/messages.js';
import type { WireDuration, WireEntry, WireRlsDescriptor } from '../../protocol/wire.js';

// envoyproxy/ratelimit's `/json` endpoint reads a `RateLimitRequest` with Go's protojson
// and writes the `RateLimitResponse` with protojson's defaults (`src/server/server_impl.go`,
// `NewJsonHandler`). This module speaks that mapping: field names in lowerCamelCase or as
// in the .proto, enums by name (or number), 64-bit and 32-bit integers as JSON numbers or
// decimal strings, `null` for "unset", unknown fields rejected; on the way out, fields
// with default values are left out, durations are strings like "1.500s" and bytes base64.

const RLS = 'RateLimitRequest';

function bad(message: string): ProtocolError {
  return new ProtocolError('SLUICE_ERR_PROTOCOL_BAD_REQUEST', `bad ${RLS}: ${message}`);
}

/** A message's fields: JSON name → name in the .proto (protojson accepts either). */
type FieldNames = Readonly<Record<string, string>>;

const REQUEST: FieldNames = {
  domain: 'domain',
  descriptors: 'descriptors',
  hitsAddend: 'hits_addend',
};
const DESCRIPTOR: FieldNames = { entries: 'entries', limit: 'limit', hitsAddend: 'hits_addend' };
const ENTRY: FieldNames = { key: 'key', value: 'value' };
const OVERRIDE: FieldNames = { requestsPerUnit: 'requests_per_unit', unit: 'unit' };

/**
 * The fields of one JSON message, by JSON name, leaving out the ones set to `null`
 * (protojson treats `null` as unset). Rejects non-objects, unknown fields and a field
 * given twice under its two names.
 */
function message(raw: unknown, at: string, names: FieldNames): Map<string, unknown> {
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) {
    throw bad(`${at} must be a JSON object`);
  }
  const byProtoName = new Map(Object.entries(names).map(([json, proto]) => [proto, json]));
  const out = new Map<string, unknown>();
  const seen = new Set<string>();
  for (const [name, value] of Object.entries(raw)) {
    const field = Object.hasOwn(names, name) ? name : byProtoName.get(name);
    if (field === undefined) throw bad(`unknown field "${name}" in ${at}`);
    if (seen.has(field)) throw bad(`field "${names[field]}" is given twice in ${at}`);
    seen.add(field);
    if (value !== null) out.set(field, value);
  }
  return out;
}

function path(at: string, field: string): string {
  return at === '' ? field : `${at}.${field}`;
}

function list(raw: unknown, at: string): readonly unknown[] {
  if (raw === undefined) return [];
  if (!Array.isArray(raw)) throw bad(`${at} must be a JSON array`);
  return raw;
}

function string(raw: unknown, at: string): string {
  if (raw === undefined) return '';
  if (typeof raw !== 'string') throw bad(`${at} must be a string`);
  return raw;
}

// protojson reads an integer from a JSON number or from a string holding exactly a JSON
// number, as long as the value is whole ("5", 5.0 and 5e0 are all 5).
const JSON_NUMBER = /^-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?$/;

function unsigned(raw: unknown, at: string, max: number, maxText: string): number {
  const n = typeof raw === 'string' && JSON_NUMBER.test(raw) ? Number(raw) : raw;
  if (typeof n !== 'number' || !Number.isInteger(n) || n < 0) {
    throw bad(`${at} must be a whole number >= 0`);
  }
  if (n > max) throw bad(`${at} must be at most ${maxText}`);
  return n;
}

const UINT32_MAX = 2 ** 32 - 1;
const uint32 = (raw: unknown, at: string): number =>
  raw === undefined ? 0 : unsigned(raw, at, UINT32_MAX, '2^32 - 1');
// uint64 on the wire; Sluice counts in safe integers, as the gRPC decoder does.
const uint64 = (raw: unknown, at: string): number =>
  unsigned(raw, at, Number.MAX_SAFE_INTEGER, '2^53 - 1');

/** `envoy.type.v3.RateLimitUnit` by number. */
const UNIT_NAMES: readonly string[] = [
  'UNKNOWN',
  'SECOND',
  'MINUTE',
  'HOUR',
  'DAY',
  'MONTH',
  'YEAR',
];

function unit(raw: unknown, at: string): string {
  if (raw === undefined) return 'UNKNOWN';
  if (typeof raw === 'string') {
    if (!UNIT_NAMES.includes(raw)) throw bad(`${at} has no value named "${raw}"`);
    return raw;
  }
  if (typeof raw === 'number' && Number.isInteger(raw) && raw >= -(2 ** 31) && raw < 2 ** 31) {
    // An unnamed number is passed on, for the decoder to reject by name.
    return UNIT_NAMES[raw] ?? String(raw);
  }
  throw bad(`${at} must be a unit name such as "MINUTE"`);
}

function entry(raw: unknown, at: string): WireEntry {
  const f = message(raw, at, ENTRY);
  return {
    key: string(f.get('key'), path(at, 'key')),
    value: string(f.get('value'), path(at, 'value')),
  };
}

function descriptor(raw: unknown, at: string, limits: DescriptorLimits): WireRlsDescriptor {
  const f = message(raw, at, DESCRIPTOR);
  const entriesAt = path(at, 'entries');
  const rawEntries = list(f.get('entries'), entriesAt);
  // Counted before reading them: an oversized request costs no more than its check.
  checkEntryCount(rawEntries.length, at, limits);
  const out: WireRlsDescriptor = {
    entries: rawEntries.map((e, i) => entry(e, `${entriesAt}[${i}]`)),
    limit: null,
    hitsAddend: null,
    isNegativeHits: false,
  };
  const limit = f.get('limit');
  if (limit !== undefined) {
    const limitAt = path(at, 'limit');
    const o = message(limit, limitAt, OVERRIDE);
    out.limit = {
      requestsPerUnit: uint32(o.get('requestsPerUnit'), path(limitAt, 'requests_per_unit')),
      unit: unit(o.get('unit'), path(limitAt, 'unit')),
    };
  }
  // google.protobuf.UInt64Value: the bare number in JSON; present (even 0) means set.
  const hits = f.get('hitsAddend');
  if (hits !== undefined) out.hitsAddend = { value: uint64(hits, path(at, 'hits_addend')) };
  return out;
}

/**
 * Reads the JSON body of upstream's `/json` endpoint (`RateLimitRequest` in protojson)
 * and validates it as the gRPC transport does. Throws `ProtocolError`
 * (`SLUICE_ERR_PROTOCOL_BAD_REQUEST`) naming the first problem: a value that is not a
 * JSON object, an unknown or repeated field, a wrong type (a non-string key or value, a
 * negative or fractional `hits_addend`, an unknown unit), or what `decodeRlsRequest`
 * rejects (no domain, no descriptors, no entries, an empty key, …), or `PolicyError`
 * (`SLUICE_ERR_DESCRIPTOR_INVALID`) for descriptors beyond `limits`. Entry values may be
 * left out (they are then empty), as upstream's own example does.
 */
export function decodeRlsJson(
  body: unknown,
  limits: DescriptorLimits = DEFAULT_DESCRIPTOR_LIMITS,
): RlsRequest {
  const f = message(body, 'the request', REQUEST);
  const rawDescriptors = list(f.get('descriptors'), 'descriptors');
  checkDescriptorCount(rawDescriptors.length, limits);
  const descriptors = rawDescriptors.map((d, i) => descriptor(d, `descriptors[${i}]`, limits));
  return decodeRlsRequest(
    {
      domain: string(f.get('domain'), 'domain'),
      descriptors,
      hitsAddend: uint32(f.get('hitsAddend'), 'hits_addend'),
    },
    limits,
  );
}

/**
 * A `google.protobuf.Duration` as protojson writes it: seconds with 0, 3, 6 or 9
 * fractional digits and an `s` suffix, e.g. `{1, 500250000}` → `"1.500250s"`, 59 s → `"59s"`.
 */
export function durationJson(d: WireDuration): string {
  let text = `${d.seconds}.${String(d.nanos).padStart(9, '0')}`;
  for (const suffix of ['000', '000', '.000'])
    if (text.endsWith(suffix)) text = text.slice(0, -suffix.length);
  return `${text}s`;
}

function checkJson(v: JsonValue, at: string): void {
  if (typeof v === 'number' && !Number.isFinite(v)) {
    // protojson refuses NaN and ±Infinity in a Struct; JSON.stringify would send null.
    throw new TypeError(`handler returned ${at} = ${v}; a Struct number must be finite`);
  }
  if (Array.isArray(v)) v.forEach((x: JsonValue, i) => checkJson(x, `${at}[${i}]`));
  else if (typeof v === 'object' && v !== null) {
    for (const [k, x] of Object.entries(v)) if (x !== undefined) checkJson(x, `${at}.${k}`);
  }
}

function headers(list: readonly WireEntry[]): Record<string, string>[] {
  return list.map(({ key, value }) => ({
    ...(key === '' ? {} : { key }),
    ...(value === '' ? {} : { value }),
  }));
}

/**
 * The JSON body upstream's `/json` endpoint answers with: the handler's answer encoded as
 * for gRPC (`encodeRlsResponse`), then written as protojson writes a `RateLimitResponse`,
 * fields in .proto order, and fields with default values (0, "", empty lists) left out:
 *
 * ```json
 * {"overallCode":"OVER_LIMIT","statuses":[{"code":"OVER_LIMIT","currentLimit":{"name":"per-ip",
 *  "requestsPerUnit":10,"unit":"MINUTE"},"durationUntilReset":"59s"}],
 *  "responseHeadersToAdd":[{"key":"x-ratelimit-limit","value":"10"}],"rawBody":"c2xvdyBkb3du",
 *  "dynamicMetadata":{"k":"v"}}
 * ```
 *
 * Throws `TypeError` when the answer cannot be sent faithfully (see `encodeRlsResponse`;
 * also a non-finite number in `dynamicMetadata`).
 */
export function encodeRlsJson(
  response: RlsResponse,
  descriptorCount: number,
): Record<string, unknown> {
  const wire = encodeRlsResponse(response, descriptorCount);
  const out: Record<string, unknown> = { overallCode: wire.overallCode };
  if (wire.statuses.length > 0) {
    out.statuses = wire.statuses.map((s) => {
      const status: Record<string, unknown> = { code: s.code };
      if (s.currentLimit !== undefined) {
        const { name, requestsPerUnit, unit: u } = s.currentLimit;
        status.currentLimit = {
          ...(name === '' ? {} : { name }),
          ...(requestsPerUnit === 0 ? {} : { requestsPerUnit }),
          unit: u,
        };
      }
      if (s.limitRemaining !== 0) status.limitRemaining = s.limitRemaining;
      if (s.durationUntilReset !== undefined)
        status.durationUntilReset = durationJson(s.durationUntilReset);
      return status;
    });
  }
  if (wire.responseHeadersToAdd.length > 0)
    out.responseHeadersToAdd = headers(wire.responseHeadersToAdd);
  if (wire.requestHeadersToAdd.length > 0)
    out.requestHeadersToAdd = headers(wire.requestHeadersToAdd);
  if (wire.rawBody !== undefined && wire.rawBody.length > 0) {
    out.rawBody = Buffer.from(wire.rawBody).toString('base64');
  }
  if (response.dynamicMetadata !== undefined) {
    checkJson(response.dynamicMetadata, 'dynamicMetadata');
    out.dynamicMetadata = response.dynamicMetadata;
  }
  return out;
}
