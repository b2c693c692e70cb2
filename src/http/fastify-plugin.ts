import type { FastifyInstance, FastifyReply, FastifyRequest, RouteOptions } from 'fastify';
import { PolicyError } from '../core/errors.js';
import {
  EdgeLimiter,
  validateRouteCost,
  type EdgeOptions,
  type EdgeStats,
  type RouteLimitOptions,
} from './http-limiter.js';
import { releaseOnClose } from './permit-release.js';

/** A route's `config.sluice`: its cost and, rarely, its label; `false` exempts the route. */
export interface SluiceRouteConfig extends RouteLimitOptions {
  /** @default `${request.method} ${routeOptions.url}` (Fastify's template, with prefixes) */
  readonly name?: string;
}

declare module 'fastify' {
  interface FastifyContextConfig {
    /** Sluice's settings for this route; see `createFastifyRateLimit`. */
    sluice?: SluiceRouteConfig | false;
  }
}

/** Options of {@link createFastifyRateLimit}. */
export interface FastifyRateLimitOptions extends EdgeOptions<FastifyRequest> {
  /**
   * The hook that checks: `onRequest` (before the body is read, the cheapest) or
   * `preHandler` (after authentication hooks that run in `preValidation`/`preHandler`
   * order before it, if the descriptor needs what they set). @default 'onRequest'
   */
  readonly hook?: 'onRequest' | 'preHandler';
}

/** The Fastify plugin and what it counted. */
export interface FastifyRateLimit {
  /** Register with `await app.register(limits.plugin)`. */
  readonly plugin: (app: FastifyInstance) => Promise<void>;
  /** Counts of outcomes so far. */
  stats(): EdgeStats;
  /** The framework-neutral core. */
  readonly edge: EdgeLimiter<FastifyRequest>;
}

function routeConfigOf(config: unknown): SluiceRouteConfig | false | undefined {
  return (config as { sluice?: SluiceRouteConfig | false } | undefined)?.sluice;
}

function validateRouteConfig(route: RouteOptions): void {
  const c = routeConfigOf(route.config);
  if (c === undefined || c === false) return;
  try {
    validateRouteCost(c.cost);
    if (c.name !== undefined && (typeof c.name !== 'string' || c.name === '')) {
      throw new PolicyError(
        'SLUICE_ERR_HTTP_CONFIG_INVALID',
        'route name must be a non-empty string',
      );
    }
  } catch (error) {
    const where = `${String(route.method)} ${route.url}`;
    throw new PolicyError(
      'SLUICE_ERR_HTTP_CONFIG_INVALID',
      `route ${where}: ${(error as Error).message}`,
      { cause: error },
    );
  }
}

/**
 * Rate limiting for Fastify (4 and 5), built on a {@link Limiter}. Every routed request is
 * checked in one hook, labelled by Fastify's route template (`request.routeOptions.url`,
 * prefixes included) and method; a route's cost comes from its `config.sluice.cost`.
 * Requests that match no route (404s) are not checked. The plugin function carries
 * `Symbol.for('skip-override')` (what the `fastify-plugin` package sets), so its hook
 * applies to the scope it is registered in, not only to an encapsulated child.
 *
 * Throws a `PolicyError` (`SLUICE_ERR_HTTP_CONFIG_INVALID`) for invalid options, and when
 * a route registered after the plugin has an invalid `config.sluice`.
 *
 * @example
 * const limits = createFastifyRateLimit({ limiter, descriptor: byApiKey({ resolve: tenantOf }) });
 * await app.register(limits.plugin);
 * app.post('/transfers/:id', { config: { sluice: { cost: 5 } } }, createTransfer);
 */
export function createFastifyRateLimit(options: FastifyRateLimitOptions): FastifyRateLimit {
  const edge = new EdgeLimiter<FastifyRequest>(options);
  const hook = options.hook ?? 'onRequest';
  if (hook !== 'onRequest' && hook !== 'preHandler') {
    throw new PolicyError(
      'SLUICE_ERR_HTTP_CONFIG_INVALID',
      `hook must be "onRequest" or "preHandler"`,
    );
  }

  const check = async (request: FastifyRequest, reply: FastifyReply): Promise<unknown> => {
    const config = routeConfigOf(request.routeOptions.config);
    const url = request.routeOptions.url;
    if (config === false || url === undefined || request.is404) return undefined;
    const label = config?.name ?? `${request.method} ${url}`;
    const verdict = await edge.decide(
      request,
      request.raw,
      label,
      config?.cost === undefined ? {} : { cost: config.cost },
    );
    if (verdict.pass) {
      reply.headers(verdict.headers);
      if (verdict.permit !== undefined) releaseOnClose(reply.raw, verdict.permit);
      return undefined;
    }
    const r = verdict.response;
    return reply.code(r.statusCode).headers(r.headers).send(r.body);
  };

  const plugin = async (app: FastifyInstance): Promise<void> => {
    app.addHook('onRoute', validateRouteConfig);
    app.addHook(hook, check);
  };
  Object.assign(plugin, {
    [Symbol.for('skip-override')]: true,
    [Symbol.for('fastify.display-name')]: 'sluice',
    [Symbol.for('plugin-meta')]: { name: 'sluice', fastify: '>=4' },
  });
  return { plugin, stats: () => edge.stats(), edge };
}
