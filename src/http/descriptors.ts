import { createHash } from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http';
import type { DescriptorInput } from '../core/descriptor.js';

/** What the middleware knows about a request besides the framework's request object. */
export interface RequestContext {
  /** The route label, `METHOD template` (`POST /transfers/:id`): never the raw URL. */
  readonly route: string;
  /** The request headers (lower-case names, as node:http gives them). */
  readonly headers: IncomingHttpHeaders;
  /** The client address under the configured `trustProxy` (see `createClientIp`). */
  clientIp(): string;
}

/** A descriptor, or `undefined` to let the request through without a check. */
export type DescriptorResult = DescriptorInput | undefined;

/**
 * Builds a request's descriptor from trusted request data: an authenticated principal,
 * a verified API key, the client address under a trusted-proxy setting. The middleware
 * adds the route entry itself (`route: 'POST /transfers/:id'`, see `routeKey`).
 *
 * Returning `undefined` lets the request through unchecked (counted as `skipped`): do it
 * only for requests another layer rejects (e.g. unauthenticated ones), or combine
 * builders with {@link firstOf} so that every request has an identity. A builder that
 * throws makes the middleware answer 500 and report the error to `onError`.
 *
 * @typeParam Req the framework's request: `IncomingMessage` (node:http, Express) or
 *   `FastifyRequest`.
 */
export type DescriptorBuilder<Req> = (
  req: Req,
  ctx: RequestContext,
) => DescriptorResult | Promise<DescriptorResult>;

/**
 * The authenticated principal, as your authentication layer left it on the request:
 * `byPrincipal((req) => req.user?.id)` gives `{ principal: 'u-42' }`, or `undefined`
 * when there is none.
 *
 * @param key the descriptor key. @default 'principal'
 */
export function byPrincipal<Req>(
  get: (req: Req) => string | undefined,
  key = 'principal',
): DescriptorBuilder<Req> {
  return (req) => {
    const id = get(req);
    return id === undefined || id === '' ? undefined : { [key]: id };
  };
}

/** Options of {@link byApiKey}. */
export interface ApiKeyOptions {
  /** The request header holding the key (lower-case). @default 'x-api-key' */
  readonly header?: string;
  /** The descriptor key. @default 'api_key' */
  readonly key?: string;
  /**
   * Maps a presented key to the identity to limit (a tenant id), or `undefined` for an
   * unknown key. Without it the identity is a SHA-256 digest of the key (hex, first 32
   * characters), so the secret never becomes a storage key; but every distinct key a
   * client invents is then its own bucket, so prefer resolving to known tenants.
   */
  readonly resolve?: (apiKey: string) => string | undefined | Promise<string | undefined>;
}

/** The SHA-256 digest of an API key as a descriptor value (hex, 128 bits). */
export function apiKeyDigest(apiKey: string): string {
  return createHash('sha256').update(apiKey).digest('hex').slice(0, 32);
}

/**
 * The API key header: `{ api_key: resolve(key) }` (see {@link ApiKeyOptions.resolve}), or
 * `undefined` when the header is missing, empty or resolves to nothing.
 */
export function byApiKey<Req = unknown>(options: ApiKeyOptions = {}): DescriptorBuilder<Req> {
  const header = (options.header ?? 'x-api-key').toLowerCase();
  const key = options.key ?? 'api_key';
  const resolve = options.resolve ?? apiKeyDigest;
  return async (_req, ctx) => {
    const raw = ctx.headers[header];
    const apiKey = Array.isArray(raw) ? raw[0] : raw;
    if (apiKey === undefined || apiKey === '') return undefined;
    const id = await resolve(apiKey);
    return id === undefined || id === '' ? undefined : { [key]: id };
  };
}

/**
 * The client address under the middleware's `trustProxy` setting: `{ client_ip: '203.0.113.7' }`.
 *
 * @param key the descriptor key. @default 'client_ip'
 */
export function byClientIp<Req = unknown>(key = 'client_ip'): DescriptorBuilder<Req> {
  return (_req, ctx) => ({ [key]: ctx.clientIp() });
}

/**
 * The first builder that gives a descriptor: `firstOf(byApiKey(...), byClientIp())` limits
 * a request by its API key when it has one and by its address otherwise.
 */
export function firstOf<Req>(
  ...builders: readonly DescriptorBuilder<Req>[]
): DescriptorBuilder<Req> {
  return async (req, ctx) => {
    for (const build of builders) {
      const d = await build(req, ctx);
      if (d !== undefined) return d;
    }
    return undefined;
  };
}
