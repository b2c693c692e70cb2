/**
 * Wildcard matching of envoyproxy/ratelimit (config_impl.go, `wildcardMatch`): a
 * configured composite key containing `*` is split on `*` once, at load time. Each `*`
 * matches any run of characters, including none; the literal parts must appear in
 * order, the first at the start and the last at the end. Patterns are matched against
 * the request's whole composite key `key_value`, not against the value alone.
 *
 * Example: `path_/api/*` split is `["path_/api/", ""]` and matches `path_/api/` and
 * `path_/api/v1/users`; `route_a*b*c` matches `route_abc` and `route_aXbYc`, not
 * `route_acb`.
 */

/** Splits a pattern on `*`; a pattern with n stars has n+1 parts. */
export function splitWildcard(pattern: string): string[] {
  return pattern.split('*');
}

/**
 * Whether `text` matches the pre-split pattern `parts`. Leftmost placement of each
 * middle part is enough: if any placement fits, the leftmost one does too.
 */
export function matchWildcard(parts: readonly string[], text: string): boolean {
  if (parts.length === 1) return parts[0] === text;
  const first = parts[0] ?? '';
  const last = parts[parts.length - 1] ?? '';
  if (!text.startsWith(first) || !text.endsWith(last)) return false;
  let fixed = 0;
  for (const p of parts) fixed += p.length;
  // Prefix and suffix must not overlap (`ab*ba` must not match `aba`).
  if (text.length < fixed) return false;
  let rest = text.slice(first.length, text.length - last.length);
  for (const part of parts.slice(1, -1)) {
    const at = rest.indexOf(part);
    if (at < 0) return false;
    rest = rest.slice(at + part.length);
  }
  return true;
}
