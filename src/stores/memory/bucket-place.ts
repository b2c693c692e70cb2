/**
 * Where MemoryStore holds a bucket. A bucket key of the layout `bucketKey` gives a policy
 * with one identity key and no scope, `{<k>=<v>}:<policy>` with `k` and `v`
 * percent-encoded, is held in that (identity key, policy) pair's value index under the
 * raw value; every other key is held under its text. The limiter can then look a bucket
 * up by the descriptor's own value string, with no key text to build and hash per check,
 * while a caller holding the text key still reaches the same bucket.
 *
 * The split is one-to-one over all strings: a key is taken apart only when it is exactly
 * `'{' + a + '=' + b + '}:' + c` with `a` free of `=` and `}`, `b` the percent-encoding of
 * some string (so `b === encodeURIComponent(decodeURIComponent(b))`) and `c` free of `:`;
 * `(a, c, decoded b)` then gives `b` and the key back. Other keys (scopes, several identity
 * keys, global policies, any text a caller chose) keep their text.
 */

/** A value index's id: its identity key and policy (`=` cannot occur in an encoded key). */
export function valueIndexId(identityKey: string, policyName: string): string {
  return `${encodeURIComponent(identityKey)}=${policyName}`;
}

/** Whether {@link valueIndexId} gives an index that {@link placeOf} can find (no `:` in the policy). */
export function indexable(policyName: string): boolean {
  return !policyName.includes(':');
}

/** A bucket key taken apart: its value index's id and the raw value. */
export interface ValuePlace {
  readonly id: string;
  readonly value: string;
}

const OPEN = 0x7b; // {
const COLON = 0x3a; // :
/** What `encodeURIComponent` leaves as is: such a string is its own encoding. */
const UNRESERVED = /^[A-Za-z0-9\-_.!~*'()]*$/;

/** The value index and value of a bucket key, or `undefined` when it is held by its text. */
export function placeOf(key: string): ValuePlace | undefined {
  if (key.charCodeAt(0) !== OPEN) return undefined;
  const close = key.indexOf('}');
  const eq = key.indexOf('=');
  if (close < 0 || eq < 0 || eq > close || key.charCodeAt(close + 1) !== COLON) return undefined;
  const policy = key.slice(close + 2);
  if (!indexable(policy)) return undefined;
  const encoded = key.slice(eq + 1, close);
  let value = encoded;
  if (!UNRESERVED.test(encoded)) {
    try {
      value = decodeURIComponent(encoded);
      if (encodeURIComponent(value) !== encoded) return undefined;
    } catch {
      return undefined; // malformed escapes: not an encoding of anything
    }
  }
  return { id: `${key.slice(1, eq)}=${policy}`, value };
}
