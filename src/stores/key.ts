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

/** A descriptor's values by key (a record descriptor, or an entry list's first values). */
export type DescriptorValues = Readonly<Record<string, string | undefined>>;

function values(keys: readonly string[], d: DescriptorValues): string {
  let out = keyValue(d[keys[0]!] ?? '');
  for (let i = 1; i < keys.length; i++) out += `&${keyValue(d[keys[i]!] ?? '')}`;
  return out;
}

const builders = new WeakMap<Policy, (d: DescriptorValues) => string>();

/**
 * {@link bucketKey} for one policy with its key layout worked out once, reading the values
 * from a record: what the limiter calls per check. (Remembering keys per value was
 * measured: on Zipf over 100k keys the extra map lookup cost as much as it saved.)
 */
export function bucketKeyBuilder(policy: Policy): (d: DescriptorValues) => string {
  let build = builders.get(policy);
  if (build === undefined) {
    build = compile(policy);
    builders.set(policy, build);
  }
  return build;
}

function compile(policy: Policy): (d: DescriptorValues) => string {
  const scopeKeys = scopeKeysOf(policy);
  const identity = policy.identity;
  const name = policy.name;
  if (identity.length === 0 && scopeKeys.length === 0) {
    const constant = `{@${name}}:${name}`;
    return () => constant;
  }
  const global = `@${name}`;
  if (scopeKeys.length === 0) return (d) => `{${values(identity, d)}}:${name}`;
  return (d) =>
    `{${identity.length === 0 ? global : values(identity, d)}}:${name}:${values(scopeKeys, d)}`;
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
  return bucketKeyBuilder(policy)(descriptorValues(descriptor));
}

/** A descriptor's values by key (the first entry of a key, should one repeat). */
export function descriptorValues(descriptor: Descriptor): DescriptorValues {
  const values = Object.create(null) as Record<string, string>;
  for (const e of descriptor) if (!(e.key in values)) values[e.key] = e.value;
  return values;
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
