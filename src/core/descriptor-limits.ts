import { PolicyError } from './errors.js';

/**
 * How large a request's descriptors may be. Every entry point (the library's
 * `toDescriptor`, envoy's ShouldRateLimit over gRPC and `/json`, Sluice's Check over gRPC
 * and `/v1/check`) checks them with the functions below, so one bound holds everywhere:
 * a value's length bounds its bucket key in the store, and the counts bound the work
 * one request can cause.
 */
export interface DescriptorLimits {
  /**
   * Descriptors in one envoy `RateLimitRequest`. Envoy sends one per matching
   * `rate_limits` action list, usually a handful. @default 64
   */
  readonly maxDescriptors: number;
  /** Entries in one descriptor (one per envoy rate limit action). @default 32 */
  readonly maxDescriptorEntries: number;
  /** Longest entry key, in UTF-16 code units. @default 256 */
  readonly maxDescriptorKeyLength: number;
  /** Longest entry value, in UTF-16 code units. @default 1024 */
  readonly maxDescriptorValueLength: number;
}

/** The limits every entry point applies unless configured otherwise. */
export const DEFAULT_DESCRIPTOR_LIMITS: DescriptorLimits = Object.freeze({
  maxDescriptors: 64,
  maxDescriptorEntries: 32,
  maxDescriptorKeyLength: 256,
  maxDescriptorValueLength: 1024,
});

/**
 * The limits with `options` over the defaults, frozen. Throws `RangeError` naming a
 * limit that is not a positive whole number.
 */
export function descriptorLimits(options: Partial<DescriptorLimits> = {}): DescriptorLimits {
  const out = { ...DEFAULT_DESCRIPTOR_LIMITS };
  for (const name of Object.keys(DEFAULT_DESCRIPTOR_LIMITS) as (keyof DescriptorLimits)[]) {
    const v = options[name];
    if (v === undefined) continue;
    if (!Number.isSafeInteger(v) || v <= 0) {
      throw new RangeError(`${name} must be a positive whole number, got ${String(v)}`);
    }
    out[name] = v;
  }
  return Object.freeze(out);
}

function invalid(message: string): PolicyError {
  return new PolicyError('SLUICE_ERR_DESCRIPTOR_INVALID', `invalid descriptor: ${message}`);
}

// Error messages quote keys, which the client sent: quoted short, with lone surrogates
// escaped (JSON.stringify does), so an answer never echoes a huge or unencodable key.
function quote(key: string): string {
  return JSON.stringify(key.length > 64 ? `${key.slice(0, 64)}…` : key);
}

/**
 * Checks the number of descriptors in one request. Throws `PolicyError`
 * (`SLUICE_ERR_DESCRIPTOR_INVALID`) naming the limit, e.g.
 * `invalid descriptor: the request has 100000 descriptors; the limit is 64`.
 */
export function checkDescriptorCount(count: number, limits: DescriptorLimits): void {
  if (count > limits.maxDescriptors) {
    throw invalid(`the request has ${count} descriptors; the limit is ${limits.maxDescriptors}`);
  }
}

/**
 * Checks the number of entries of the descriptor at `at` (e.g. `descriptors[2]`, or
 * `the descriptor`). Throws `PolicyError` (`SLUICE_ERR_DESCRIPTOR_INVALID`) naming the
 * limit, e.g. `invalid descriptor: descriptors[2] has 40 entries; the limit is 32`.
 */
export function checkEntryCount(count: number, at: string, limits: DescriptorLimits): void {
  if (count > limits.maxDescriptorEntries) {
    throw invalid(`${at} has ${count} entries; the limit is ${limits.maxDescriptorEntries}`);
  }
}

/**
 * Checks one entry's key and value, `at` naming where it is (e.g.
 * `descriptors[0].entries[1]`): the key at most `maxDescriptorKeyLength` long, the
 * value at most `maxDescriptorValueLength`, and both well-formed UTF-16 (a lone
 * surrogate has no UTF-8 form, so it could not be encoded into a store key or a label).
 * Throws `PolicyError` (`SLUICE_ERR_DESCRIPTOR_INVALID`) naming the entry and its key, e.g.
 * `invalid descriptor: descriptors[0].entries[1] (key "path"): value is 2000 characters long; the limit is 1024`.
 */
export function checkEntry(key: string, value: string, at: string, limits: DescriptorLimits): void {
  const where = `${at} (key ${quote(key)})`;
  if (key.length > limits.maxDescriptorKeyLength) {
    throw invalid(
      `${where}: key is ${key.length} characters long; the limit is ${limits.maxDescriptorKeyLength}`,
    );
  }
  if (value.length > limits.maxDescriptorValueLength) {
    throw invalid(
      `${where}: value is ${value.length} characters long; the limit is ${limits.maxDescriptorValueLength}`,
    );
  }
  if (!key.isWellFormed()) throw invalid(`${where}: key contains a lone UTF-16 surrogate`);
  if (!value.isWellFormed()) throw invalid(`${where}: value contains a lone UTF-16 surrogate`);
}
