import { DECISION_PATHS, type Decision } from '../../core/decision.js';
import { DEFAULT_DESCRIPTOR_LIMITS, type DescriptorLimits } from '../../core/descriptor-limits.js';
import { ProtocolError } from '../../core/errors.js';
import { STATUSES as ALL_STATUSES, type Status } from '../../core/status.js';
import { decodeCheckRequest } from '../grpc/decode.js';
import type { NativeCheckRequest, NativeCheckResponse } from '../../protocol/messages.js';
import type { WireCheckRequest } from '../../protocol/wire.js';

const CHECK = 'CheckRequest';
const FIELDS: ReadonlySet<string> = new Set([
  'entries',
  'descriptor',
  'cost',
  'requestId',
  'policies',
]);

function bad(message: string): ProtocolError {
  return new ProtocolError('SLUICE_ERR_PROTOCOL_BAD_REQUEST', `bad ${CHECK}: ${message}`);
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/**
 * Reads the JSON body of `POST /v1/check`:
 *
 * ```json
 * {"entries":[{"key":"tenant","value":"acme"}],"cost":1,"requestId":"r-1","policies":["per-tenant"]}
 * {"descriptor":{"tenant":"acme"}}
 * ```
 *
 * The descriptor is `entries` (in order) or `descriptor` (a record, in key order), not
 * both; `cost`, `requestId` and `policies` are optional, and `null` means absent. Then
 * validates it as the gRPC transport validates `sluice.v1.CheckRequest`. Throws
 * `ProtocolError` (`SLUICE_ERR_PROTOCOL_BAD_REQUEST`) naming the first problem: not an
 * object, an unknown field, both or neither descriptor form, an entry that is not
 * `{key, value}` with a non-empty string key and a string value, a cost that is not a
 * whole number up to 2^53 − 1, a non-string request id, or an empty policy name;
 * `PolicyError` (`SLUICE_ERR_DESCRIPTOR_INVALID`) for entries beyond `limits`.
 */
export function decodeCheckJson(
  body: unknown,
  limits: DescriptorLimits = DEFAULT_DESCRIPTOR_LIMITS,
): NativeCheckRequest {
  if (!isObject(body)) throw bad('the request must be a JSON object');
  for (const name of Object.keys(body)) {
    if (!FIELDS.has(name)) throw bad(`unknown field "${name}"`);
  }
  const given = (name: string): unknown => body[name] ?? undefined;
  const entries = given('entries');
  const descriptor = given('descriptor');
  if (entries !== undefined && descriptor !== undefined) {
    throw bad('give the descriptor as "entries" or as "descriptor", not both');
  }
  let wireEntries: unknown;
  if (descriptor !== undefined) {
    if (!isObject(descriptor)) throw bad('descriptor must be a JSON object of key → value strings');
    wireEntries = Object.entries(descriptor).map(([key, value]) => ({ key, value }));
  } else if (entries !== undefined) {
    if (!Array.isArray(entries)) throw bad('entries must be a JSON array');
    entries.forEach((e: unknown, i) => {
      if (!isObject(e)) throw bad(`entries[${i}] must be a JSON object with "key" and "value"`);
      for (const name of Object.keys(e)) {
        if (name !== 'key' && name !== 'value')
          throw bad(`unknown field "${name}" in entries[${i}]`);
      }
    });
    wireEntries = entries;
  } else {
    throw bad('the descriptor is required, as "entries" or "descriptor"');
  }
  const cost = given('cost');
  if (cost !== undefined && typeof cost !== 'number') throw bad('cost must be a number');
  // The gRPC decoder is total over any input shape and checks the rest.
  return decodeCheckRequest(
    {
      entries: wireEntries,
      cost,
      requestId: given('requestId'),
      policies: given('policies'),
    } as Partial<WireCheckRequest>,
    limits,
  );
}

const STATUSES: ReadonlySet<string> = new Set(ALL_STATUSES);
const PATHS: ReadonlySet<string> = new Set(DECISION_PATHS);

// A handler that answers with these is broken; the error surfaces as 500.
function nonNegative(v: number, at: string): number {
  if (typeof v !== 'number' || !Number.isFinite(v) || v < 0) {
    throw new TypeError(`handler returned ${at} = ${String(v)}; expected a finite number >= 0`);
  }
  return v;
}

function status(v: Status, at: string): Status {
  if (!STATUSES.has(v)) throw new TypeError(`handler returned ${at} = ${String(v)}; not a Status`);
  return v;
}

type Fields = Pick<
  NativeCheckResponse,
  'allowed' | 'status' | 'retryAfterMs' | 'resetAfterMs' | 'remaining' | 'limit' | 'delayMs'
>;

// Times go out as whole ms rounded up, as over gRPC, so a caller that waits that long is
// never early; `remaining` keeps its fraction.
function fields(d: Fields, at: string): Fields {
  return {
    allowed: d.allowed === true,
    status: status(d.status, `${at}status`),
    retryAfterMs: Math.ceil(nonNegative(d.retryAfterMs, `${at}retryAfterMs`)),
    resetAfterMs: Math.ceil(nonNegative(d.resetAfterMs, `${at}resetAfterMs`)),
    remaining: nonNegative(d.remaining, `${at}remaining`),
    limit: nonNegative(d.limit, `${at}limit`),
    ...(d.delayMs === undefined
      ? {}
      : { delayMs: Math.ceil(nonNegative(d.delayMs, `${at}delayMs`)) }),
  };
}

/**
 * The JSON body of a `/v1/check` answer: a {@link NativeCheckResponse} with
 * `retryAfterMs`, `resetAfterMs` and `delayMs` rounded up to whole milliseconds,
 * `policy` left out when absent, and each decision as `Decision` (path `store`,
 * `fail-open`, …):
 *
 * ```json
 * {"allowed":false,"status":"OVER_LIMIT","retryAfterMs":1500,"resetAfterMs":60000,"remaining":0,
 *  "limit":10,"policy":"per-tenant","decisions":[{"policy":"per-tenant","path":"store",
 *  "allowed":false,"status":"OVER_LIMIT","retryAfterMs":1500,"resetAfterMs":60000,
 *  "remaining":0,"limit":10}]}
 * ```
 *
 * Throws `TypeError` on a negative or non-finite number, an unknown status or path.
 */
export function encodeCheckJson(r: NativeCheckResponse): NativeCheckResponse {
  return {
    ...fields(r, ''),
    ...(r.policy === undefined ? {} : { policy: r.policy }),
    decisions: r.decisions.map((d, i): Decision => {
      const at = `decisions[${i}].`;
      if (!PATHS.has(d.path)) throw new TypeError(`handler returned ${at}path = ${String(d.path)}`);
      return { policy: d.policy, path: d.path, ...fields(d, at) };
    }),
  };
}

/**
 * The HTTP status of a `/v1/check` answer: 200 `OK`, 429 `OVER_LIMIT`, 503
 * `UNAVAILABLE` (as store errors map in the registry), 400 `INVALID_POLICY`.
 */
export function checkHttpStatus(s: Status): number {
  switch (s) {
    case 'OK':
      return 200;
    case 'OVER_LIMIT':
      return 429;
    case 'UNAVAILABLE':
      return 503;
    case 'INVALID_POLICY':
      return 400;
  }
}
