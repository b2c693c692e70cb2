import type { IncomingMessage, ServerResponse } from 'node:http';
import { PolicyError } from '../core/errors.js';
import {
  EdgeLimiter,
  validateRouteCost,
  type EdgeOptions,
  type EdgeStats,
  type EdgeVerdict,
  type RouteLimitOptions,
} from './http-limiter.js';
import type { Reservation } from '../limiter/limiter.js';
import { releaseOnClose } from './permit-release.js';
import type { EdgeResponse } from './responses.js';

/** Options of {@link createHttpRateLimit}. */
export interface HttpRateLimitOptions extends EdgeOptions<IncomingMessage> {
  /**
   * Prepended to the router's template. Express gives a router's routes relative to where
   * the router is mounted (`req.route.path` is `/transfers/:id` under `app.use('/v1',
   * router)`); give one rate limit per router with `prefix: '/v1'` to label them
   * `POST /v1/transfers/:id`. @default ''
   */
  readonly prefix?: string;
}

/** Options of one route's middleware. */
export interface HttpRouteOptions extends RouteLimitOptions {
  /**
   * The route label, e.g. `POST /transfers/:id`. Needed only where no router sets
   * `req.route` (plain node:http, or a middleware mounted with `app.use`).
   * @default `${req.method} ${prefix}${req.route.path}`
   */
  readonly name?: string;
  /**
   * For a cost known only after the response (docs/costs.md): `cost` is then the
   * estimate, reserved before the handler runs, and this reads the actual once the
   * response has closed: from a header the handler set (`res.getHeader`), `res.locals`,
   * or a usage body it recorded. It is called when the client went away before the
   * response finished too, with what the handler reported so far. `undefined` (nothing
   * reported), a throw or a value that is not a non-negative safe integer settles at the
   * estimate. Needs `cost`. @default none: the cost is charged before the handler, as is
   */
  readonly settle?: (
    req: IncomingMessage,
    res: SettledResponse,
  ) => number | undefined | Promise<number | undefined>;
}

/** The response a route's `settle` reads: node:http's, with Express's `res.locals` when there. */
export type SettledResponse = ServerResponse & { readonly locals?: Record<string, unknown> };

/** A route's `settle`, validated where it is declared, and its estimate. */
interface RouteSettle {
  readonly read: NonNullable<HttpRouteOptions['settle']>;
  readonly estimate: number;
}

function routeSettle(options: HttpRouteOptions, cost: number | undefined): RouteSettle | undefined {
  const read = options.settle;
  if (read === undefined) return undefined;
  if (typeof read !== 'function') {
    throw new PolicyError('SLUICE_ERR_HTTP_CONFIG_INVALID', 'settle must be a function');
  }
  if (cost === undefined) {
    throw new PolicyError(
      'SLUICE_ERR_HTTP_CONFIG_INVALID',
      'a route with settle needs cost: the estimate reserved before the handler runs',
    );
  }
  return { read, estimate: cost };
}

/** A Connect / Express (4 and 5) middleware. The promise never rejects. */
export type HttpMiddleware = (
  req: IncomingMessage,
  res: ServerResponse,
  next: (error?: unknown) => void,
) => Promise<void>;

/** The part of Express's `req.route` this module reads, without depending on Express. */
interface RoutedRequest extends IncomingMessage {
  route?: { path?: unknown; methods?: Record<string, boolean | undefined> };
}

function sendEdgeResponse(res: ServerResponse, response: EdgeResponse): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  res.statusCode = response.statusCode;
  for (const [name, value] of Object.entries(response.headers)) res.setHeader(name, value);
  res.setHeader('content-length', Buffer.byteLength(response.body));
  res.end(response.body);
}

function applyVerdict(
  res: ServerResponse,
  verdict: EdgeVerdict,
  settleWith?: (reservation: Reservation) => void,
): boolean {
  if (!verdict.pass) {
    sendEdgeResponse(res, verdict.response);
    return false;
  }
  for (const [name, value] of Object.entries(verdict.headers)) res.setHeader(name, value);
  if (verdict.permit !== undefined) releaseOnClose(res, verdict.permit);
  if (verdict.reservation !== undefined) settleWith?.(verdict.reservation);
  return true;
}

/**
 * Rate limiting for node:http, Connect and Express, built on a {@link Limiter}.
 *
 * Limits are attached per route, because only there is the route template known (Express
 * sets `req.route` after routing; a global `app.use` middleware sees only the raw URL):
 *
 * @example
 * const limits = createHttpRateLimit({ limiter, descriptor: byApiKey({ resolve: tenantOf }) });
 * app.post('/transfers/:id', limits.route({ cost: 5 }), createTransfer);
 * app.get('/transfers/:id/status', limits.route({ cost: 1 }), transferStatus);
 * // both /transfers/1 and /transfers/2 are "POST /transfers/:id": one bucket per tenant
 */
export class HttpRateLimit {
  /** The framework-neutral core (stats, client address). */
  readonly edge: EdgeLimiter<IncomingMessage>;
  readonly #prefix: string;

  constructor(options: HttpRateLimitOptions) {
    this.edge = new EdgeLimiter(options);
    this.#prefix = options.prefix ?? '';
  }

  /** Counts of outcomes so far; see {@link EdgeStats}. */
  stats(): EdgeStats {
    return this.edge.stats();
  }

  /**
   * The label of a routed request: its method and the router's template. `HEAD` on a
   * route that only declares `GET` (Express answers it with the GET handler) is `GET`.
   */
  #label(req: RoutedRequest): string | undefined {
    const path = req.route?.path;
    if (typeof path !== 'string') return undefined;
    let method = req.method ?? 'GET';
    const methods = req.route?.methods;
    if (method === 'HEAD' && methods?.['head'] !== true && methods?.['get'] === true)
      method = 'GET';
    return `${method} ${this.#prefix}${path}`;
  }

  /**
   * A middleware for one route: put it in the route's own handler list
   * (`app.post('/transfers/:id', limits.route({ cost: 5 }), handler)`), never in
   * `app.use`. Allowed requests continue with the rate-limit headers set; others are
   * answered with 429, 503 or 500 and the route handler never runs.
   *
   * Throws a `PolicyError` (`SLUICE_ERR_HTTP_CONFIG_INVALID`) for an invalid cost or name.
   */
  route(options: HttpRouteOptions = {}): HttpMiddleware {
    const cost = validateRouteCost(options.cost);
    const name = options.name;
    if (name !== undefined && (typeof name !== 'string' || name === '')) {
      throw new PolicyError(
        'SLUICE_ERR_HTTP_CONFIG_INVALID',
        'route name must be a non-empty string',
      );
    }
    const settle = routeSettle(options, cost);
    const routeOptions: RouteLimitOptions = cost === undefined ? {} : { cost };
    return async (req, res, next) => {
      const label = name ?? this.#label(req as RoutedRequest);
      const verdict =
        label === undefined
          ? this.edge.fail(
              new PolicyError(
                'SLUICE_ERR_HTTP_CONFIG_INVALID',
                'no route template: mount the rate limit in a route (app.post(path, limits.route(), handler)) or give it a name',
              ),
              '(no route)',
            )
          : await this.edge.decide(req, req, label, routeOptions, settle !== undefined);
      const settleWith = (r: Reservation) => this.#settleOnClose(req, res, r, label!, settle!);
      if (applyVerdict(res, verdict, settleWith)) next();
    };
  }

  /** Settles `reservation` once `res` has closed (finished, or its client went away). */
  #settleOnClose(
    req: IncomingMessage,
    res: ServerResponse,
    reservation: Reservation,
    route: string,
    settle: RouteSettle,
  ): void {
    res.once('close', () => {
      void this.edge.settle(
        reservation,
        route,
        () => settle.read(req, res),
        res.writableFinished,
        settle.estimate,
      );
    });
  }

  /**
   * The same for plain node:http handlers: resolves `true` when the request may proceed
   * (the rate-limit headers are already set on `res`), `false` when it has been answered.
   *
   * @example
   * http.createServer(async (req, res) => {
   *   if (!(await limits.check(req, res, { name: 'POST /transfers/:id', cost: 5 }))) return;
   *   ...
   * });
   */
  async check(
    req: IncomingMessage,
    res: ServerResponse,
    options: HttpRouteOptions & { readonly name: string },
  ): Promise<boolean> {
    const cost = validateRouteCost(options.cost);
    const settle = routeSettle(options, cost);
    const verdict = await this.edge.decide(
      req,
      req,
      options.name,
      cost === undefined ? {} : { cost },
      settle !== undefined,
    );
    return applyVerdict(res, verdict, (r) =>
      this.#settleOnClose(req, res, r, options.name, settle!),
    );
  }
}

/** Creates an {@link HttpRateLimit}. Throws a `PolicyError` for invalid options. */
export function createHttpRateLimit(options: HttpRateLimitOptions): HttpRateLimit {
  return new HttpRateLimit(options);
}
