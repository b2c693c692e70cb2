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
  /**
   * For a cost known only from the response (docs/costs.md): `cost` is then the estimate,
   * reserved in the plugin's hook, and this reads the actual once the response has closed
   * (a header the handler set, a usage it recorded on the request). As the node:http
   * middleware's `settle`: a client gone away settles at what was reported so far,
   * `undefined` or a bad value at the estimate. Needs `cost`. @default none
   */
  readonly settle?: (
    request: FastifyRequest,
    reply: FastifyReply,
  ) => number | undefined | Promise<number | undefined>;
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
    const cost = validateRouteCost(c.cost);
    if (c.settle !== undefined && typeof c.settle !== 'function') {
      throw new PolicyError('SLUICE_ERR_HTTP_CONFIG_INVALID', 'settle must be a function');
    }
    if (c.settle !== undefined && cost === undefined) {
      throw new PolicyError(
        'SLUICE_ERR_HTTP_CONFIG_INVALID',
        'a route with settle needs cost: the estimate reserved before the handler runs',
      );
    }
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
    const settle = config?.settle;
    const verdict = await edge.decide(
      request,
      request.raw,
      label,
      config?.cost === undefined ? {} : { cost: config.cost },
      settle !== undefined,
    );
    if (verdict.pass) {
      reply.headers(verdict.headers);
      if (verdict.permit !== undefined) releaseOnClose(reply.raw, verdict.permit);
      const reservation = verdict.reservation;
      if (reservation !== undefined && settle !== undefined) {
        // Settled once the response has closed: finished, or its client went away.
        reply.raw.once('close', () => {
          void edge.settle(
            reservation,
            label,
            () => settle(request, reply),
            reply.raw.writableFinished,
            config?.cost,
          );
        });
      }
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
