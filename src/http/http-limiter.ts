import type { IncomingMessage } from 'node:http';
import type { DescriptorInput } from '../core/descriptor.js';
import { PolicyError } from '../core/errors.js';
import type { Policy } from '../core/policy.js';
import type { CheckResult } from '../limiter/check-result.js';
import type { CheckOptions, Limiter, Reservation, SettleResult } from '../limiter/limiter.js';
import type { AdmissionBoundary, AdmissionPermit } from '../overload/admission-boundary.js';
import type { Criticality } from '../core/criticality.js';
import type { OverloadReason } from '../overload/overload-error.js';
import { createClientIp, type ForwardedHeader, type TrustProxy } from './client-ip.js';
import type { DescriptorBuilder, RequestContext } from './descriptors.js';
import {
  rateLimitHeaders,
  retryAfterSeconds,
  type RateLimitHeaderOptions,
} from './rate-limit-headers.js';
import {
  internalErrorResponse,
  overloadedResponse,
  overLimitResponse,
  unavailableResponse,
  type EdgeResponse,
} from './responses.js';

/**
 * What happened to one request at the edge:
 * - `allowed`: every enforced policy admitted it (the store decided);
 * - `fail-open`: allowed, but at least one `open` policy could not ask the store;
 * - `denied`: 429, an enforced policy is over its limit;
 * - `unavailable`: 503, the store could not decide and a `closed` policy denied;
 * - `skipped`: the descriptor builder returned `undefined`, no check was made;
 * - `error`: 500, the builder threw or the limiter rejected the input (see `onError`);
 * - `overloaded`: 503, the rate check passed but the admission boundary (`overload`)
 *   refused it (`EdgeEvent.overload` says why).
 */
export type EdgeOutcome =
  'allowed' | 'fail-open' | 'denied' | 'unavailable' | 'skipped' | 'error' | 'overloaded';

/** One request's outcome, given to `onEvent`. Carries no identity. */
export interface EdgeEvent {
  readonly outcome: EdgeOutcome;
  /** The route label, e.g. `POST /transfers/:id`. */
  readonly route: string;
  /** The deciding policy's name, when a policy decided. */
  readonly policy?: string;
  /** The check's result, when a check was made. */
  readonly result?: CheckResult;
  /** Why the admission boundary refused it, for `overloaded`. */
  readonly overload?: OverloadReason;
}

/**
 * How a reserved request was settled after its response (a route with `settle`), given to
 * `onSettle`. Carries no identity.
 */
export interface EdgeSettleEvent {
  /** The route label. */
  readonly route: string;
  /** The units settled: what the route's `settle` reported, else the estimate. */
  readonly actual: number;
  /** False when the client went away before the response finished. */
  readonly finished: boolean;
  /** What the settle did; absent when it failed (`error`). */
  readonly result?: SettleResult;
  /** Why the settle failed (also given to `onError`): the reservation stays at its estimate. */
  readonly error?: unknown;
}

/** Counts of outcomes since the middleware was created. */
export type EdgeStats = Record<EdgeOutcome, number>;

/** Options shared by the node:http/Express middleware and the Fastify plugin. */
export interface EdgeOptions<Req> {
  readonly limiter: Limiter;
  /** Builds each request's descriptor from trusted request data; see {@link DescriptorBuilder}. */
  readonly descriptor: DescriptorBuilder<Req>;
  /** Who may report the client address; see {@link TrustProxy}. @default false */
  readonly trustProxy?: TrustProxy;
  /** The header the trusted proxies write. @default 'x-forwarded-for' */
  readonly forwardedHeader?: ForwardedHeader;
  /**
   * The descriptor key the route label is added under (unless the builder set it), so
   * policies can match and price routes: `cost: { rules: [{ when: { route: 'POST
   * /transfers/:id' }, cost: 5 }] }`. `false` adds nothing. @default 'route'
   */
  readonly routeKey?: string | false;
  /** Which rate-limit headers to send. @default { onAllowed: true, legacy: false } */
  readonly headers?: RateLimitHeaderOptions;
  /** The caller budget of each check, in ms (see `CheckOptions.timeoutMs`). @default the policies' timeouts */
  readonly timeoutMs?: number;
  /** Called once per request with its outcome (metrics, logs). Must not throw. @default none */
  readonly onEvent?: (event: EdgeEvent) => void;
  /**
   * Called with every error the client only sees as a generic 500: a builder that threw,
   * an invalid descriptor or cost. @default ignore (the 500 is still counted as `error`)
   */
  readonly onError?: (error: unknown, route: string) => void;
  /**
   * Called once per reserved request (a route with `settle`) after its settle, with what
   * it did. Must not throw. @default none
   */
  readonly onSettle?: (event: EdgeSettleEvent) => void;
  /**
   * The admission boundary (`sluice/overload`) every request passes after the rate check
   * (skipped checks included): concurrency limit, queue, breaker. A refusal is a 503
   * with `Retry-After` and a body naming the reason; an admitted request holds its permit
   * until the response closes (5xx counts as a failure, 503/504 as a drop, a client that
   * went away as neither). @default none
   */
  readonly overload?: AdmissionBoundary;
  /**
   * The request's criticality for the boundary. Derive it from trusted data (the route,
   * the authenticated caller); never take it from an untrusted header. @default 'CRITICAL'
   */
  readonly criticality?: (req: Req, ctx: RequestContext) => Criticality | undefined;
  /**
   * When the caller stops waiting, in ms on the boundary's clock (ms since the epoch by
   * default), e.g. from a deadline header your callers send. A request that would have
   * to queue past it is refused at once (`deadline`). @default none
   */
  readonly deadlineMs?: (req: Req, ctx: RequestContext) => number | undefined;
}

/** What a route adds to the shared options. */
export interface RouteLimitOptions {
  /**
   * Units this route consumes in every matched policy, overriding the policies' cost
   * rules (a non-negative safe integer). @default the policies' cost rules for the route entry
   */
  readonly cost?: number;
}

/** The edge's answer: let the request through with these headers, or answer instead. */
export type EdgeVerdict =
  | {
      readonly pass: true;
      readonly headers: Readonly<Record<string, string>>;
      /** Held while the request runs; the adapters release it when the response closes. */
      readonly permit?: AdmissionPermit;
      /** The route's reservation (a route with `settle`): the adapters settle it after the response. */
      readonly reservation?: Reservation;
    }
  | { readonly pass: false; readonly response: EdgeResponse };

const NO_HEADERS: Readonly<Record<string, string>> = Object.freeze({});

/** Whole seconds, rounded up, at least 1 (a 0 would invite an immediate retry). */
function retryAfterSecondsOf(ms: number): number {
  return Math.max(1, Math.ceil(ms / 1000));
}

function httpConfigError(message: string): PolicyError {
  return new PolicyError('SLUICE_ERR_HTTP_CONFIG_INVALID', message);
}

/** Validates a route's cost where it is declared, so a typo fails at start-up. */
export function validateRouteCost(cost: unknown): number | undefined {
  if (cost === undefined) return undefined;
  if (typeof cost !== 'number' || !Number.isSafeInteger(cost) || cost < 0) {
    throw httpConfigError(
      `route cost must be a non-negative safe integer, got ${typeof cost === 'number' ? String(cost) : typeof cost}`,
    );
  }
  return cost;
}

function withRoute(d: DescriptorInput, key: string, route: string): DescriptorInput {
  if (Array.isArray(d)) {
    const entries = d as readonly { key: string; value: string }[];
    return entries.some((e) => e.key === key) ? entries : [...entries, { key, value: route }];
  }
  const record = d as Readonly<Record<string, string>>;
  return Object.hasOwn(record, key) ? record : { ...record, [key]: route };
}

/**
 * The framework-neutral core of the HTTP edge: builds the descriptor, checks it, and
 * turns the result into "pass with these headers" or a 429 / 503 / 500 response. The
 * node:http/Express middleware and the Fastify plugin are thin adapters over it.
 */
export class EdgeLimiter<Req> {
  readonly #limiter: Limiter;
  readonly #build: DescriptorBuilder<Req>;
  readonly #clientIp: (req: IncomingMessage) => string;
  readonly #routeKey: string | false;
  readonly #onAllowed: boolean;
  readonly #headerOptions: RateLimitHeaderOptions;
  readonly #timeoutMs: number | undefined;
  readonly #onEvent: ((event: EdgeEvent) => void) | undefined;
  readonly #onError: ((error: unknown, route: string) => void) | undefined;
  readonly #onSettle: ((event: EdgeSettleEvent) => void) | undefined;
  readonly #overload: AdmissionBoundary | undefined;
  readonly #criticality: EdgeOptions<Req>['criticality'];
  readonly #deadlineMs: EdgeOptions<Req>['deadlineMs'];
  readonly #stats: EdgeStats = {
    allowed: 0,
    'fail-open': 0,
    denied: 0,
    unavailable: 0,
    skipped: 0,
    error: 0,
    overloaded: 0,
  };
  #policySet: readonly Policy[] | undefined;
  #policyByName = new Map<string, Policy>();

  constructor(options: EdgeOptions<Req>) {
    if (typeof options.descriptor !== 'function') {
      throw httpConfigError('descriptor must be a function building a descriptor from a request');
    }
    if (options.routeKey !== undefined && options.routeKey !== false) {
      if (typeof options.routeKey !== 'string' || options.routeKey === '') {
        throw httpConfigError('routeKey must be a non-empty string or false');
      }
    }
    if (options.timeoutMs !== undefined && !(options.timeoutMs > 0)) {
      throw httpConfigError(
        `timeoutMs must be a positive number of ms, got ${String(options.timeoutMs)}`,
      );
    }
    this.#limiter = options.limiter;
    this.#build = options.descriptor;
    this.#clientIp = createClientIp({
      ...(options.trustProxy === undefined ? {} : { trustProxy: options.trustProxy }),
      ...(options.forwardedHeader === undefined ? {} : { header: options.forwardedHeader }),
    });
    this.#routeKey = options.routeKey ?? 'route';
    this.#onAllowed = options.headers?.onAllowed ?? true;
    this.#headerOptions = options.headers ?? {};
    this.#timeoutMs = options.timeoutMs;
    this.#onEvent = options.onEvent;
    this.#onError = options.onError;
    this.#onSettle = options.onSettle;
    if (options.criticality !== undefined && typeof options.criticality !== 'function') {
      throw httpConfigError('criticality must be a function returning a criticality');
    }
    this.#overload = options.overload;
    this.#criticality = options.criticality;
    if (options.deadlineMs !== undefined && typeof options.deadlineMs !== 'function') {
      throw httpConfigError('deadlineMs must be a function returning ms on the boundary clock');
    }
    this.#deadlineMs = options.deadlineMs;
  }

  /** Counts of outcomes so far (a copy). */
  stats(): EdgeStats {
    return { ...this.#stats };
  }

  /** The client address of a request under this edge's trusted-proxy setting. */
  clientIp(raw: IncomingMessage): string {
    return this.#clientIp(raw);
  }

  #policy = (name: string): Policy | undefined => {
    const set = this.#limiter.policies;
    if (set !== this.#policySet) {
      this.#policySet = set;
      this.#policyByName = new Map(set.map((p) => [p.name, p]));
    }
    return this.#policyByName.get(name);
  };

  #emit(
    outcome: EdgeOutcome,
    route: string,
    result?: CheckResult,
    overload?: OverloadReason,
  ): void {
    this.#stats[outcome]++;
    if (this.#onEvent === undefined) return;
    const policy = result?.decision?.policy;
    try {
      this.#onEvent({
        outcome,
        route,
        ...(policy === undefined ? {} : { policy }),
        ...(result === undefined ? {} : { result }),
        ...(overload === undefined ? {} : { overload }),
      });
    } catch {
      // An observer must never change the answer.
    }
  }

  /**
   * The verdict for a request that cannot be decided because of an error (a builder that
   * threw, an invalid descriptor, a route without a template): a generic 500, the error
   * given to `onError`, the outcome counted as `error`.
   */
  fail(error: unknown, route: string): EdgeVerdict {
    this.#emit('error', route);
    try {
      this.#onError?.(error, route);
    } catch {
      // A failing error hook must not turn a 500 into an unhandled rejection.
    }
    return { pass: false, response: internalErrorResponse() };
  }

  /**
   * Decides one request. Never rejects: every failure becomes a verdict.
   *
   * @param req the framework's request, given to the descriptor builder
   * @param raw the node:http request (socket address, headers)
   * @param route the route label, `METHOD template`
   * @param reserve the route's cost is an estimate: reserve it (`Limiter.reserve`), and the
   *   verdict carries the reservation for the adapter to settle ({@link EdgeLimiter.settle})
   */
  async decide(
    req: Req,
    raw: IncomingMessage,
    route: string,
    routeOptions: RouteLimitOptions = {},
    reserve = false,
  ): Promise<EdgeVerdict> {
    let result: CheckResult;
    let reservation: Reservation | undefined;
    const ctx: RequestContext = {
      route,
      headers: raw.headers,
      clientIp: () => this.#clientIp(raw),
    };
    try {
      const built = await this.#build(req, ctx);
      if (built === undefined) {
        if (this.#overload !== undefined) return await this.#admit(req, ctx, route, NO_HEADERS);
        this.#emit('skipped', route);
        return { pass: true, headers: NO_HEADERS };
      }
      const descriptor = this.#routeKey === false ? built : withRoute(built, this.#routeKey, route);
      const options: CheckOptions = {
        ...(routeOptions.cost === undefined ? {} : { cost: routeOptions.cost }),
        ...(this.#timeoutMs === undefined ? {} : { timeoutMs: this.#timeoutMs }),
      };
      if (reserve) {
        reservation = await this.#limiter.reserve(descriptor, {
          ...options,
          cost: routeOptions.cost!,
        });
        result = reservation;
      } else {
        result = await this.#limiter.check(descriptor, options);
      }
    } catch (error) {
      return this.fail(error, route);
    }

    if (result.status === 'UNAVAILABLE') {
      this.#emit('unavailable', route, result);
      return { pass: false, response: unavailableResponse() };
    }
    if (!result.allowed) {
      const seconds = retryAfterSeconds(result);
      const headers = rateLimitHeaders(result, this.#policy, this.#headerOptions);
      this.#emit('denied', route, result);
      // A denial always has a deciding policy; the fallback keeps the body well-formed.
      return {
        pass: false,
        response: overLimitResponse(result.decision?.policy ?? 'unknown', seconds, headers),
      };
    }
    const failOpen = result.decisions.some((d) => d.path === 'fail-open');
    const headers = this.#onAllowed
      ? rateLimitHeaders(result, this.#policy, this.#headerOptions)
      : NO_HEADERS;
    if (this.#overload !== undefined) {
      let verdict: EdgeVerdict;
      try {
        verdict = await this.#admit(req, ctx, route, headers, result, failOpen);
      } catch (error) {
        verdict = this.fail(error, route);
      }
      // Refused after the reservation: the call does not happen, the estimate comes back.
      if (!verdict.pass && reservation !== undefined)
        void this.settle(reservation, route, 0, false);
      return verdict.pass && reservation !== undefined ? { ...verdict, reservation } : verdict;
    }
    this.#emit(failOpen ? 'fail-open' : 'allowed', route, result);
    return reservation === undefined
      ? { pass: true, headers }
      : { pass: true, headers, reservation };
  }

  /**
   * Settles a route's reservation after its response closed: at `actual`, what the route's
   * `settle` read (a function, which may throw or return a bad number: then the estimate),
   * or at the estimate when it reported nothing (`undefined`). Told to `onSettle`; a failed
   * settle to `onError` as well (the reservation then stays at its estimate). Never rejects.
   */
  async settle(
    reservation: Reservation,
    route: string,
    actual: number | undefined | (() => number | undefined | Promise<number | undefined>),
    finished: boolean,
    estimate?: number,
  ): Promise<void> {
    let units: number | undefined;
    try {
      units = typeof actual === 'function' ? await actual() : actual;
      if (units !== undefined && (!Number.isSafeInteger(units) || units < 0)) {
        throw httpConfigError(
          `settle must return a non-negative safe integer or undefined, got ${String(units)}`,
        );
      }
    } catch (error) {
      this.#reportError(error, route);
      units = undefined;
    }
    const settled = units ?? estimate ?? 0;
    let event: EdgeSettleEvent;
    try {
      const result = await reservation.settle(settled);
      event = { route, actual: settled, finished, result };
    } catch (error) {
      this.#reportError(error, route);
      event = { route, actual: settled, finished, error };
    }
    try {
      this.#onSettle?.(event);
    } catch {
      // An observer must never change the outcome.
    }
  }

  #reportError(error: unknown, route: string): void {
    try {
      this.#onError?.(error, route);
    } catch {
      // A failing error hook must not become an unhandled rejection.
    }
  }

  /** The admission boundary's step, after the rate check let the request through. */
  async #admit(
    req: Req,
    ctx: RequestContext,
    route: string,
    headers: Readonly<Record<string, string>>,
    result?: CheckResult,
    failOpen = false,
  ): Promise<EdgeVerdict> {
    const boundary = this.#overload as AdmissionBoundary;
    const criticality = this.#criticality?.(req, ctx);
    const deadlineMs = this.#deadlineMs?.(req, ctx);
    const a = await boundary.admit({
      ...(criticality === undefined ? {} : { criticality }),
      ...(deadlineMs === undefined ? {} : { deadlineMs }),
    });
    if (!a.admitted) {
      this.#emit('overloaded', route, result, a.reason);
      return {
        pass: false,
        response: overloadedResponse(a.reason, a.code, retryAfterSecondsOf(a.retryAfterMs)),
      };
    }
    this.#emit(
      result === undefined ? 'skipped' : failOpen ? 'fail-open' : 'allowed',
      route,
      result,
    );
    return { pass: true, headers, permit: a.permit };
  }
}
