import {
  checkEntry,
  checkEntryCount,
  DEFAULT_DESCRIPTOR_LIMITS,
  type DescriptorLimits,
} from './descriptor-limits.js';
import { PolicyError } from './errors.js';

/** One (key, value) pair of a descriptor, e.g. `{ key: 'tenant', value: 'acme' }`. */
export interface DescriptorEntry {
  readonly key: string;
  readonly value: string;
}

/**
 * What a request is, as an ordered list of (key, value) entries built from trusted
 * request data: `[{ key: 'tenant', value: 'acme' }, { key: 'route', value: 'POST /transfers/{id}' }]`.
 * Keys are unique within a descriptor. Never put raw URLs or unbounded values here:
 * every distinct value can become a bucket.
 */
export type Descriptor = readonly DescriptorEntry[];

/** A descriptor, or the same as a record (`{ tenant: 'acme' }`, insertion order kept). */
export type DescriptorInput = Descriptor | Readonly<Record<string, string>>;

/** Default upper bound on a descriptor value, in UTF-16 code units. */
export const DEFAULT_MAX_DESCRIPTOR_VALUE_LENGTH =
  DEFAULT_DESCRIPTOR_LIMITS.maxDescriptorValueLength;

function invalid(message: string): PolicyError {
  return new PolicyError('SLUICE_ERR_DESCRIPTOR_INVALID', `invalid descriptor: ${message}`);
}

/**
 * Validates a descriptor and returns it as frozen entries. Throws `PolicyError`
 * (`SLUICE_ERR_DESCRIPTOR_INVALID`) naming the problem: not an array/record, empty, more
 * entries than `maxDescriptorEntries`, an empty or duplicate key, a non-string value, a
 * key or value longer than its limit, or a string with lone surrogates (which could not
 * be encoded injectively). `limits` is a {@link DescriptorLimits}, or a number: the
 * longest value, with the other limits at their defaults.
 */
export function toDescriptor(
  input: unknown,
  limits: number | DescriptorLimits = DEFAULT_DESCRIPTOR_LIMITS,
): Descriptor {
  const bounds =
    typeof limits === 'number'
      ? { ...DEFAULT_DESCRIPTOR_LIMITS, maxDescriptorValueLength: limits }
      : limits;
  let raw: [unknown, unknown][];
  if (Array.isArray(input)) {
    raw = input.map((e: unknown, i) => {
      if (typeof e !== 'object' || e === null) {
        throw invalid(`entry ${i} is not an object with "key" and "value"`);
      }
      const { key, value } = e as { key?: unknown; value?: unknown };
      return [key, value];
    });
  } else if (typeof input === 'object' && input !== null) {
    raw = Object.entries(input);
  } else {
    throw invalid(`expected an array of {key, value} entries or a record, got ${typeName(input)}`);
  }
  if (raw.length === 0) throw invalid('it has no entries');
  checkEntryCount(raw.length, 'the descriptor', bounds);
  const seen = new Set<string>();
  const entries = raw.map(([key, value], i): DescriptorEntry => {
    if (typeof key !== 'string' || key.length === 0) {
      throw invalid(`entry ${i} has ${typeof key === 'string' ? 'an empty' : 'a non-string'} key`);
    }
    if (typeof value !== 'string') {
      throw invalid(`value of "${key}" must be a string, got ${typeName(value)}`);
    }
    checkEntry(key, value, `entries[${i}]`, bounds);
    if (seen.has(key)) throw invalid(`key "${key}" appears more than once`);
    seen.add(key);
    return Object.freeze({ key, value });
  });
  return Object.freeze(entries);
}

function typeName(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'an array';
  return typeof v;
}
