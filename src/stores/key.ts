import type { Descriptor } from '../core/descriptor.js';
import type { Policy } from '../core/policy.js';

/**
 * One value of a key: percent-encoded (everything outside `A-Z a-z 0-9 - _ . ! ~ * ' ( )`,
 * so `{`, `}`, `:`, `=`, `&`, `@`, `%`, whitespace and every non-ASCII byte are escaped),
 * and the empty value as `=`, which encoding never produces: a lone empty identity would
 * otherwise make the hash tag `{}`, which Redis Cluster ignores. Decoding is unique, so
 * the encoding is injective (descriptors are checked for lone surrogates first).
 */
export function keyValue(v: string): string {
  return v === '' ? '=' : encodeURIComponent(v);
}

function values(keys: readonly string[], descriptor: Descriptor): string {
  return keys.map((k) => keyValue(descriptor.find((d) => d.key === k)?.value ?? '')).join('&');
}

/**
 * The storage key of a policy's bucket for a descriptor that matches the policy:
 * `{<identity>}:<policy>[:<scope>]`.
 *
 * - `<identity>` is the values of the policy's identity keys, joined by `&`, or
 *   `@<policy>` for a global policy. It is a Redis Cluster hash tag, so every bucket of
 *   one identity lives in one slot; it never contains `{` or `}` (they are encoded).
 * - `<scope>` is the values of the other match keys without a fixed value, joined by `&`.
 *   Fixed-value match entries are the same for every bucket of the policy and are left out.
 *
 * The key names are not written: the policy name fixes which keys are read, in which
 * order, so they would add bytes to every bucket and tell nothing apart. Policy names
 * cannot contain `:` or `{`, and encoded values cannot contain `:`, `{`, `}`, `=` or `&`
 * except as written above, so distinct (policy, values) give distinct keys and a value
 * can never move a key to another identity's slot. Stores add their own prefix.
 */
export function bucketKey(policy: Policy, descriptor: Descriptor): string {
  const identity =
    policy.identity.length === 0 ? `@${policy.name}` : values(policy.identity, descriptor);
  const scopeKeys = scopeKeysOf(policy);
  const scope = scopeKeys.length === 0 ? '' : `:${values(scopeKeys, descriptor)}`;
  return `{${identity}}:${policy.name}${scope}`;
}

/** A policy's scope keys: its match keys without a fixed value that are not identity keys. */
export function scopeKeysOf(policy: Policy): string[] {
  return policy.match
    .filter((m) => m.value === undefined && !policy.identity.includes(m.key))
    .map((m) => m.key);
}

/** The hash tag of a bucket key (the text between its first `{` and the next `}`). */
export function hashTagOf(key: string): string {
  const open = key.indexOf('{');
  const close = key.indexOf('}', open + 1);
  return open >= 0 && close > open + 1 ? key.slice(open + 1, close) : key;
}

/**
 * The bucket-key-shaped name of a request id's dedup record: in the hash tag of the
 * batch's first key, so Redis keeps it in the same slot as the buckets it guards.
 */
export function dedupKey(firstBucketKey: string, requestId: string): string {
  return `{${hashTagOf(firstBucketKey)}}:rid:${encodeURIComponent(requestId)}`;
}
