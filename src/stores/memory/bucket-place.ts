/**
 * Where MemoryStore holds a bucket. A bucket key of the layout `bucketKey` gives a policy
 * with one identity key and no scope, `{<v>}:<policy>` with `v` the key's form of the
 * value (`keyValue`: percent-encoded, the empty value as `=`), is held in that policy's
 * value index under the raw value; every other key is held under its text. The limiter
 * can then look a bucket up by the descriptor's own value string, with no key text to
 * build and hash per check, while a caller holding the text key still reaches the same
 * bucket.
 *
 * The split is one-to-one over all strings: a key is taken apart only when it is exactly
 * `'{' + b + '}:' + c` with `c` free of `:` and `b` either `=` (the empty value) or the
 * percent-encoding of a non-empty string (`b === encodeURIComponent(decodeURIComponent(b))`);
 * `(c, decoded b)` then gives `b` and the key back. Other keys (scopes, several identity
 * values joined by `&`, global policies' `@`, any text a caller chose) keep their text.
 */

/** A value index's id: its policy (the key text names no identity key). */
export function valueIndexId(policyName: string): string {
  return policyName;
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
  if (close < 2 || key.charCodeAt(close + 1) !== COLON) return undefined;
  const policy = key.slice(close + 2);
  if (!indexable(policy)) return undefined;
  const encoded = key.slice(1, close);
  if (encoded === '=') return { id: valueIndexId(policy), value: '' };
  let value = encoded;
  if (!UNRESERVED.test(encoded)) {
    try {
      value = decodeURIComponent(encoded);
      if (encodeURIComponent(value) !== encoded) return undefined;
    } catch {
      return undefined; // malformed escapes: not an encoding of anything
    }
  }
  return { id: valueIndexId(policy), value };
}
