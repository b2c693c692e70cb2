import type { IncomingMessage } from 'node:http';
import { BlockList, isIP } from 'node:net';
import { PolicyError } from '../core/errors.js';

/**
 * Which hops in front of this server are trusted to report the client's address:
 * - `false` (the default): none. The client is the socket's peer; `X-Forwarded-For` and
 *   `Forwarded` are ignored, so a client cannot choose its own identity.
 * - a number `n >= 1`: exactly `n` proxies sit in front of this server (a load balancer
 *   is 1). The client is the address `n` hops back from the socket: the socket peer is
 *   hop 1, the rightmost forwarded entry hop 2, and so on.
 * - a list of addresses and CIDR ranges (`['10.0.0.0/8', '::1']`): walking back from the
 *   socket peer through the forwarded entries, the client is the first address not in
 *   the list.
 */
export type TrustProxy = false | number | readonly string[];

/** The header the trusted proxies write. Only that one is read; the other is ignored. */
export type ForwardedHeader = 'x-forwarded-for' | 'forwarded';

/** Options of {@link createClientIp}. */
export interface ClientIpOptions {
  /** @default false: the socket address, forwarded headers ignored */
  readonly trustProxy?: TrustProxy;
  /** @default 'x-forwarded-for' */
  readonly header?: ForwardedHeader;
}

/** Reads the client address of a request; see {@link createClientIp}. */
export type ClientIpResolver = (req: IncomingMessage) => string;

function configError(message: string): PolicyError {
  return new PolicyError('SLUICE_ERR_HTTP_CONFIG_INVALID', `invalid trustProxy: ${message}`);
}

/**
 * An address in canonical form for matching and as a descriptor value: IPv4-mapped IPv6
 * (`::ffff:10.0.0.1`, what a dual-stack socket reports) becomes IPv4, IPv6 is lower-cased,
 * and an IPv6 zone (`%eth0`) is dropped. `undefined` when `raw` is not an IP address.
 */
export function normalizeIp(raw: string): string | undefined {
  let s = raw.trim();
  const zone = s.indexOf('%');
  if (zone >= 0) s = s.slice(0, zone);
  const family = isIP(s);
  if (family === 4) return s;
  if (family !== 6) return undefined;
  s = s.toLowerCase();
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/.exec(s);
  if (mapped !== null && isIP(mapped[1]!) === 4) return mapped[1]!;
  return s;
}

/**
 * One forwarded address as proxies write it, without port or brackets:
 * `203.0.113.7`, `203.0.113.7:5000`, `2001:db8::1`, `[2001:db8::1]`, `[2001:db8::1]:443`.
 * `undefined` for anything else (`unknown`, obfuscated `_hidden` identifiers, garbage).
 */
function parseForwardedAddress(raw: string): string | undefined {
  let s = raw.trim();
  if (s.startsWith('[')) {
    const end = s.indexOf(']');
    if (end < 0) return undefined;
    const rest = s.slice(end + 1);
    if (rest !== '' && !/^:\d{1,5}$/.test(rest)) return undefined;
    s = s.slice(1, end);
    return isIP(s) === 6 ? normalizeIp(s) : undefined;
  }
  // IPv4 with a port has exactly one colon; bare IPv6 has several.
  const colon = s.indexOf(':');
  if (colon >= 0 && colon === s.lastIndexOf(':')) {
    if (!/^\d{1,5}$/.test(s.slice(colon + 1))) return undefined;
    s = s.slice(0, colon);
  }
  return normalizeIp(s);
}

/** `X-Forwarded-For` entries, leftmost (claimed origin) first. Node joins repeated headers with ", ". */
function xForwardedFor(req: IncomingMessage): string[] {
  const h = req.headers['x-forwarded-for'];
  if (h === undefined) return [];
  return (Array.isArray(h) ? h.join(',') : h).split(',');
}

/**
 * The `for=` values of RFC 7239 `Forwarded` elements, leftmost first. Quoted strings
 * may contain `,` `;` and `=`; an element without `for=` yields `''` (not an address), so
 * the positions of the hops are kept.
 */
function forwardedFor(req: IncomingMessage): string[] {
  const h = req.headers['forwarded'];
  if (h === undefined) return [];
  const text = Array.isArray(h) ? h.join(',') : h;
  const out: string[] = [];
  let forValue = '';
  let token = '';
  let quoted = false;
  const endPair = () => {
    const eq = token.indexOf('=');
    if (eq > 0 && token.slice(0, eq).trim().toLowerCase() === 'for') {
      forValue = token.slice(eq + 1).trim();
    }
    token = '';
  };
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!;
    if (quoted) {
      if (c === '\\' && i + 1 < text.length) token += text[++i]!;
      else if (c === '"') quoted = false;
      else token += c;
    } else if (c === '"') quoted = true;
    else if (c === ';') endPair();
    else if (c === ',') {
      endPair();
      out.push(forValue);
      forValue = '';
    } else token += c;
  }
  endPair();
  out.push(forValue);
  return out;
}

function buildBlockList(entries: readonly string[]): BlockList {
  const list = new BlockList();
  for (const entry of entries) {
    if (typeof entry !== 'string')
      throw configError(`expected address strings, got ${typeof entry}`);
    const slash = entry.indexOf('/');
    const addr = normalizeIp(slash < 0 ? entry : entry.slice(0, slash));
    if (addr === undefined) throw configError(`"${entry}" is not an IP address or CIDR range`);
    const type = isIP(addr) === 4 ? 'ipv4' : 'ipv6';
    if (slash < 0) {
      list.addAddress(addr, type);
      continue;
    }
    const bitsText = entry.slice(slash + 1);
    const bits = Number(bitsText);
    const max = type === 'ipv4' ? 32 : 128;
    if (!/^\d{1,3}$/.test(bitsText) || bits > max) {
      throw configError(`"${entry}" has a prefix length outside 0..${max}`);
    }
    list.addSubnet(addr, bits, type);
  }
  return list;
}

/**
 * Builds the function that reads a request's client address, according to `trustProxy`
 * (see {@link TrustProxy}). The result is a normalized IP address (see
 * {@link normalizeIp}); without a trusted proxy it is always the socket's peer.
 *
 * A forwarded entry that is not an address (`unknown`, an obfuscated identifier, garbage)
 * where a client address is expected ends the walk: the last address that was trusted
 * to report it (a proxy) is returned, so a malformed header can only lump its sender in
 * with its proxy, never choose another identity. When the chain is shorter than the hop
 * count, the farthest address in it is returned.
 *
 * Throws a `PolicyError` (`SLUICE_ERR_HTTP_CONFIG_INVALID`) for an invalid setting.
 *
 * @example
 * const clientIp = createClientIp({ trustProxy: 1 }); // one load balancer in front
 * clientIp(req); // the rightmost X-Forwarded-For entry, which the load balancer wrote
 */
export function createClientIp(options: ClientIpOptions = {}): ClientIpResolver {
  const trust = options.trustProxy ?? false;
  const header = options.header ?? 'x-forwarded-for';
  if (header !== 'x-forwarded-for' && header !== 'forwarded') {
    throw configError(`header must be "x-forwarded-for" or "forwarded", got ${String(header)}`);
  }
  const socketIp = (req: IncomingMessage): string =>
    normalizeIp(req.socket.remoteAddress ?? '') ?? 'unknown';
  if (trust === false) return socketIp;
  const read = header === 'forwarded' ? forwardedFor : xForwardedFor;
  let trusted: (ip: string, hop: number) => boolean;
  if (typeof trust === 'number') {
    if (!Number.isSafeInteger(trust) || trust < 1) {
      throw configError(`a hop count must be a whole number >= 1, got ${String(trust)}`);
    }
    trusted = (_ip, hop) => hop <= trust;
  } else if (Array.isArray(trust)) {
    const list = buildBlockList(trust);
    trusted = (ip) => list.check(ip, isIP(ip) === 4 ? 'ipv4' : 'ipv6');
  } else {
    throw configError(`expected false, a hop count or a list of CIDR ranges`);
  }
  return (req) => {
    let current = socketIp(req);
    if (current === 'unknown') return current;
    const entries = read(req);
    // Walk from the socket peer (hop 1) back through the entries, rightmost first.
    for (let hop = 1; trusted(current, hop); hop++) {
      const raw = entries[entries.length - hop];
      if (raw === undefined) return current; // chain shorter than the trusted hops
      const next = parseForwardedAddress(raw);
      if (next === undefined) return current;
      current = next;
    }
    return current;
  };
}
