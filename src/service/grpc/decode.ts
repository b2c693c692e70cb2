import type { DescriptorEntry } from '../../core/descriptor.js';
import {
  checkDescriptorCount,
  checkEntry,
  checkEntryCount,
  DEFAULT_DESCRIPTOR_LIMITS,
  type DescriptorLimits,
} from '../../core/descriptor-limits.js';
import { ProtocolError } from '../../core/errors.js';
import type {
  NativeCheckRequest,
  RlsDescriptor,
  RlsLimitOverride,
  RlsOverrideUnit,
  RlsRequest,
} from '../../protocol/messages.js';
import type {
  WireCheckRequest,
  WireEntry,
  WireRlsDescriptor,
  WireRlsRequest,
} from '../../protocol/wire.js';

const OVERRIDE_UNITS: ReadonlySet<string> = new Set<RlsOverrideUnit>([
  'SECOND',
  'MINUTE',
  'HOUR',
  'DAY',
  'MONTH',
  'YEAR',
]);

function bad(message: string, what: string): ProtocolError {
  return new ProtocolError('SLUICE_ERR_PROTOCOL_BAD_REQUEST', `bad ${what}: ${message}`);
}

// Decoded messages always have these shapes; the checks stay total so a caller handing
// in anything else (a test, a future JSON bridge) gets a ProtocolError, not a TypeError.
// `owner` names the descriptor the entries belong to, for the entry-count limit.
function entries(
  raw: unknown,
  path: string,
  owner: string,
  what: string,
  limits: DescriptorLimits,
): DescriptorEntry[] {
  if (!Array.isArray(raw) || raw.length === 0) {
    throw bad(`${path} must have at least one entry`, what);
  }
  checkEntryCount(raw.length, owner, limits);
  return raw.map((e: Partial<WireEntry> | null, j) => {
    if (typeof e?.key !== 'string' || e.key.length === 0) {
      throw bad(`${path}[${j}].key is empty`, what);
    }
    if (typeof e.value !== 'string') throw bad(`${path}[${j}].value is not a string`, what);
    checkEntry(e.key, e.value, `${path}[${j}]`, limits);
    return { key: e.key, value: e.value };
  });
}

function wholeNumber(v: unknown): v is number {
  return typeof v === 'number' && Number.isSafeInteger(v) && v >= 0;
}

const RLS = 'RateLimitRequest';

function rlsDescriptor(
  d: Partial<WireRlsDescriptor> | null,
  i: number,
  limits: DescriptorLimits,
): RlsDescriptor {
  const at = `descriptors[${i}]`;
  if (typeof d !== 'object' || d === null) throw bad(`${at} is not a message`, RLS);
  const out: { -readonly [K in keyof RlsDescriptor]: RlsDescriptor[K] } = {
    entries: entries(d.entries, `${at}.entries`, at, RLS, limits),
  };
  if (d.isNegativeHits === true) {
    // Refunds are not supported; charging a refund as a hit would be worse than failing.
    throw bad(`${at}.is_negative_hits is not supported`, RLS);
  }
  if (d.limit !== undefined && d.limit !== null) {
    const { requestsPerUnit, unit } = d.limit;
    if (!wholeNumber(requestsPerUnit)) {
      throw bad(`${at}.limit.requests_per_unit must be a whole number`, RLS);
    }
    if (typeof unit !== 'string' || !OVERRIDE_UNITS.has(unit)) {
      throw bad(
        `${at}.limit.unit must be one of ${[...OVERRIDE_UNITS].join(', ')}; got ${String(unit)}`,
        RLS,
      );
    }
    out.limit = { requestsPerUnit, unit: unit as RlsLimitOverride['unit'] };
  }
  if (d.hitsAddend !== undefined && d.hitsAddend !== null) {
    const { value } = d.hitsAddend;
    if (!wholeNumber(value)) {
      throw bad(`${at}.hits_addend must be a whole number of at most 2^53 - 1`, RLS);
    }
    out.hitsAddend = value;
  }
  return out;
}

/**
 * Validates a decoded `RateLimitRequest`. Throws `ProtocolError`
 * (`SLUICE_ERR_PROTOCOL_BAD_REQUEST`) naming the first problem by its proto field path:
 * an empty domain, no descriptors, a descriptor without entries, an empty key, an
 * override with an unknown unit, a `hits_addend` above 2^53 − 1, or a refund
 * (`is_negative_hits`, not supported). Entry values may be empty, as envoy allows.
 * Descriptors beyond `limits` (too many, too many entries, a key or value too long, a
 * lone surrogate) throw `PolicyError` (`SLUICE_ERR_DESCRIPTOR_INVALID`) as every entry
 * point does (see `DescriptorLimits`).
 */
export function decodeRlsRequest(
  wire: Partial<WireRlsRequest>,
  limits: DescriptorLimits = DEFAULT_DESCRIPTOR_LIMITS,
): RlsRequest {
  // upstream's own words for these two (service/ratelimit.go, shouldRateLimitWorker)
  if (typeof wire.domain !== 'string' || wire.domain.length === 0) {
    throw new ProtocolError(
      'SLUICE_ERR_PROTOCOL_BAD_REQUEST',
      'rate limit domain must not be empty',
    );
  }
  if (!Array.isArray(wire.descriptors) || wire.descriptors.length === 0) {
    throw new ProtocolError(
      'SLUICE_ERR_PROTOCOL_BAD_REQUEST',
      'rate limit descriptor list must not be empty',
    );
  }
  checkDescriptorCount(wire.descriptors.length, limits);
  const hits = wire.hitsAddend ?? 0;
  if (!wholeNumber(hits)) throw bad('hits_addend must be a whole number', RLS);
  return {
    domain: wire.domain,
    descriptors: wire.descriptors.map((d, i) => rlsDescriptor(d, i, limits)),
    hitsAddend: Math.max(1, hits),
  };
}

const CHECK = 'CheckRequest';

/**
 * Validates a decoded `sluice.v1.CheckRequest`. Throws `ProtocolError`
 * (`SLUICE_ERR_PROTOCOL_BAD_REQUEST`) for no entries, an empty key, a cost above
 * 2^53 − 1 or an empty policy name; `PolicyError` (`SLUICE_ERR_DESCRIPTOR_INVALID`) for
 * entries beyond `limits`. An empty `request_id` means none.
 */
export function decodeCheckRequest(
  wire: Partial<WireCheckRequest>,
  limits: DescriptorLimits = DEFAULT_DESCRIPTOR_LIMITS,
): NativeCheckRequest {
  const out: { -readonly [K in keyof NativeCheckRequest]: NativeCheckRequest[K] } = {
    entries: entries(wire.entries, 'entries', 'the descriptor', CHECK, limits),
  };
  if (wire.cost !== undefined && wire.cost !== null) {
    if (!wholeNumber(wire.cost))
      throw bad('cost must be a whole number of at most 2^53 - 1', CHECK);
    out.cost = wire.cost;
  }
  if (wire.requestId !== undefined && wire.requestId !== '') {
    if (typeof wire.requestId !== 'string') throw bad('request_id is not a string', CHECK);
    out.requestId = wire.requestId;
  }
  const policies = wire.policies ?? [];
  if (!Array.isArray(policies)) throw bad('policies is not a list', CHECK);
  if (policies.length > 0) {
    policies.forEach((p: unknown, i) => {
      if (typeof p !== 'string' || p.length === 0) throw bad(`policies[${i}] is empty`, CHECK);
    });
    out.policies = [...policies];
  }
  return out;
}
