import * as http from 'node:http';
import * as net from 'node:net';
import type { AddressInfo } from 'node:net';
import { DEFAULT_DESCRIPTOR_LIMITS, type DescriptorLimits } from '../../core/descriptor-limits.js';
import { errorReply, json, parseJson, toErrorReply, type Reply } from './http-replies.js';
import { serverTimeouts } from './http-timeouts.js';
import { ProtocolError } from '../../core/errors.js';
import type { MetricsTransport, ServiceMetrics } from '../../metrics/service-metrics.js';
import type { ShutdownResult } from '../grpc/server.js';
import type { CallContext, GrpcHandlers } from '../grpc/handlers.js';
import { checkHttpStatus, decodeCheckJson, encodeCheckJson } from './check-json.js';
import { readBody } from './read-body.js';
import { REQUEST_ID_METADATA_KEY } from '../../protocol/metadata.js';
import { requestIdOf } from '../request-id.js';
import { decodeRlsJson, encodeRlsJson } from './rls-json.js';
import type { StatusSnapshot } from '../status/status-snapshot.js';
import { renderStatusPage } from './status-page.js';

/**
 * The service core the HTTP server calls: the gRPC handlers (one object can serve both
 * transports) plus the `/rlconfig` text. Over limit is an answer, never a rejection;
 * throw a `SluiceError` to answer with its registry HTTP status.
 */
export interface HttpHandlers extends GrpcHandlers {
  /** The loaded rules as text, for `GET /rlconfig` (upstream's debug dump). */
  rlconfig(): string;
}

/** Options of {@link HttpServer}. */
export interface HttpServerOptions {
  /** Served at `GET /metrics`, and told how long each decision call took. @default none: `/metrics` is 404 */
  readonly metrics?: ServiceMetrics;
  /**
   * Served at `GET /status` as an HTML page, and as JSON with `?format=json`.
   * @default none: `/status` is 404
   */
  readonly status?: () => StatusSnapshot;
  /** Largest request body accepted, in bytes; larger ones get 413. @default 1_048_576 (1 MiB) */
  readonly maxBodyBytes?: number;
  /** Bounds on the descriptors of `/json` and `/v1/check` requests. @default DEFAULT_DESCRIPTOR_LIMITS */
  readonly descriptorLimits?: DescriptorLimits;
  /**
   * How long a client may take to send a request's headers, in ms; past it the server
   * answers 408 and closes the connection. At most `requestTimeoutMs`. @default 10_000
   */
  readonly headersTimeoutMs?: number;
  /**
   * How long a client may take to send a whole request, headers and body, in ms; past it
   * the server answers 408 and closes the connection, so a client trickling its body
   * cannot hold a connection open for long. @default 30_000
   */
  readonly requestTimeoutMs?: number;
  /** How long an idle keep-alive connection stays open, in ms. @default 5_000 */
  readonly keepAliveTimeoutMs?: number;
  /**
   * How long `shutdown()` keeps serving after `/healthcheck` turns 500, in ms, so load
   * balancers stop sending traffic before new connections are refused. @default 0
   */
  readonly drainDelayMs?: number;
  /**
   * Called with every failure that is not a `SluiceError` (the client sees only 500
   * "internal error") and the request path. @default ignore
   */
  readonly onError?: (error: unknown, path: string) => void;
}

export { INTERNAL_ERROR_MESSAGE } from './http-replies.js';

const DEFAULT_MAX_BODY_BYTES = 1024 * 1024;
// Past the limit, a client's upload is read and dropped (so it can read the 413) up to this.
const DRAIN_BYTES = 8 * 1024 * 1024;
const TEXT_TYPE = 'text/plain; charset=utf-8';
const HTML_TYPE = 'text/html; charset=utf-8';
const TRANSPORT: MetricsTransport = 'http';
/** While draining, how long a keep-alive connection may stay idle before it is closed. */
const DRAIN_IDLE_MS = 500;

type Method = 'GET' | 'HEAD' | 'POST';

interface Exchange {
  readonly req: http.IncomingMessage;
  readonly res: http.ServerResponse;
  readonly path: string;
  readonly context: CallContext;
}

interface Route {
  readonly methods: readonly Method[];
  /** The RPC this route carries, for `sluice_decision_duration_seconds{method}`. */
  readonly rpc?: string;
  readonly run: (x: Exchange) => Promise<void>;
}

/**
 * Sluice over HTTP/1.1 on `node:http`: envoyproxy/ratelimit's HTTP port (`POST /json`,
 * `GET /healthcheck`) and its debug `GET /rlconfig`, plus `GET /metrics` (Prometheus) and
 * Sluice's native `POST /v1/check` and the status page `GET /status`. Requests are validated before handlers see them, as
 * over gRPC; every error answers with a JSON body `{"error", "code"}` whose status comes
 * from the error-code registry. Unknown paths are 404 and wrong methods 405 (with
 * `Allow`); bodies over `maxBodyBytes` are 413; a request not fully sent within
 * `requestTimeoutMs` is 408.
 *
 * @example
 * ```ts
 * const server = new HttpServer(handlers, { metrics, drainDelayMs: 5_000 });
 * await server.listen('0.0.0.0', 8080);
 * process.once('SIGTERM', () => void server.shutdown(10_000));
 * ```
 */
export class HttpServer {
  readonly #handlers: HttpHandlers;
  readonly #options: HttpServerOptions;
  readonly #maxBodyBytes: number;
  readonly #limits: DescriptorLimits;
  readonly #server: http.Server;
  readonly #routes: ReadonlyMap<string, Route>;
  /** Abort controllers of calls whose answer is not written yet. */
  readonly #inFlight = new Set<AbortController>();
  /** Open connections between requests, and since when (absent while one is served). */
  readonly #idleSince = new Map<net.Socket, number>();
  #healthy = true;
  #closing = false;
  #port: number | undefined;
  #shutdown: Promise<ShutdownResult> | undefined;

  /**
   * Throws `RangeError` for a `maxBodyBytes` or timeout that is not a positive whole
   * number, or a `headersTimeoutMs` above `requestTimeoutMs`.
   */
  constructor(handlers: HttpHandlers, options: HttpServerOptions = {}) {
    this.#handlers = handlers;
    this.#options = options;
    this.#maxBodyBytes = options.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES;
    if (!Number.isSafeInteger(this.#maxBodyBytes) || this.#maxBodyBytes <= 0) {
      throw new RangeError(
        `maxBodyBytes must be a positive whole number, got ${this.#maxBodyBytes}`,
      );
    }
    this.#routes = new Map<string, Route>([
      ['/json', { methods: ['POST'], rpc: 'ShouldRateLimit', run: (x) => this.#rls(x) }],
      ['/v1/check', { methods: ['POST'], rpc: 'Check', run: (x) => this.#check(x) }],
      ['/healthcheck', { methods: ['GET', 'HEAD'], run: (x) => this.#healthcheck(x) }],
      ['/metrics', { methods: ['GET', 'HEAD'], run: (x) => this.#metrics(x) }],
      ['/rlconfig', { methods: ['GET', 'HEAD'], run: (x) => this.#rlconfig(x) }],
      ['/status', { methods: ['GET', 'HEAD'], run: (x) => this.#status(x) }],
    ]);
    this.#limits = options.descriptorLimits ?? DEFAULT_DESCRIPTOR_LIMITS;
    this.#server = http.createServer(serverTimeouts(options), (req, res) => {
      void this.#handle(req, res);
    });
  }

  /** The bound port (useful after `listen(host, 0)`); `undefined` before `listen`. */
  get port(): number | undefined {
    return this.#port;
  }

  /** Whether `/healthcheck` answers 200 "OK" (true) or 500. Starts true. */
  get healthy(): boolean {
    return this.#healthy;
  }

  /** Sets what `/healthcheck` answers; `shutdown()` sets it to false for good. */
  setHealthy(healthy: boolean): void {
    if (this.#shutdown === undefined) this.#healthy = healthy;
  }

  /**
   * Binds `host:port` (`port` 0 picks a free one) and starts serving; resolves with the
   * bound port. Call once; IPv6 hosts may be given bare (`::1`).
   */
  listen(host: string, port: number): Promise<number> {
    if (this.#port !== undefined || this.#shutdown !== undefined || this.#server.listening) {
      return Promise.reject(new Error('HttpServer.listen() may be called once, before shutdown()'));
    }
    this.#server.on('connection', (socket: net.Socket) => {
      this.#idleSince.set(socket, performance.now());
      socket.once('close', () => this.#idleSince.delete(socket));
    });
    return new Promise((resolve, reject) => {
      const onError = (error: Error): void => reject(error);
      this.#server.once('error', onError);
      this.#server.listen(port, host.startsWith('[') ? host.slice(1, -1) : host, () => {
        this.#server.off('error', onError);
        this.#port = (this.#server.address() as AddressInfo).port;
        resolve(this.#port);
      });
    });
  }

  /**
   * Shuts down gracefully: `/healthcheck` turns 500 at once, requests keep being served
   * for `drainDelayMs`, then new connections are refused and in-flight requests finish.
   * Every answer from then on carries `Connection: close`, so a keep-alive connection
   * closes after its next answer; one that stays idle for half a second is closed.
   * After `timeoutMs` the rest are cut off: their handlers' `signal` aborts and their
   * connections are destroyed. Idempotent: every call returns the first call's promise.
   */
  shutdown(timeoutMs = 10_000): Promise<ShutdownResult> {
    this.#shutdown ??= this.#stop(timeoutMs);
    return this.#shutdown;
  }

  async #stop(timeoutMs: number): Promise<ShutdownResult> {
    this.#healthy = false;
    const drainDelayMs = this.#options.drainDelayMs ?? 0;
    if (drainDelayMs > 0) await new Promise((r) => setTimeout(r, drainDelayMs));
    this.#closing = true;
    if (!this.#server.listening) return { forced: false };
    return new Promise((resolve) => {
      // Idle keep-alive connections are not closed at once, as http.Server.close() does:
      // a client may be writing its next request on one right now, and would see a reset
      // for a request it sent. A busy connection gets that request answered (with
      // `Connection: close`) instead; only a connection idle for a while is closed.
      const closeIdle = (): void => {
        const now = performance.now();
        for (const [socket, since] of this.#idleSince) {
          if (now - since >= DRAIN_IDLE_MS) socket.destroy();
        }
      };
      const poll = setInterval(closeIdle, DRAIN_IDLE_MS / 5);
      let finished = false;
      const done = (result: ShutdownResult): void => {
        if (finished) return;
        finished = true;
        clearTimeout(timer);
        clearInterval(poll);
        this.#server.close(); // not listening any more: this only stops http's own timers
        resolve(result);
      };
      const timer = setTimeout(() => {
        for (const c of this.#inFlight) c.abort(new Error('server shut down'));
        this.#server.closeAllConnections();
        done({ forced: true });
      }, timeoutMs);
      // net.Server's close: stops accepting, and calls back once every connection is gone.
      net.Server.prototype.close.call(this.#server, () => done({ forced: false }));
      closeIdle();
    });
  }

  async #handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const path = (req.url ?? '/').split('?', 1)[0] ?? '/';
    const route = this.#routes.get(path);
    const controller = new AbortController();
    this.#inFlight.add(controller);
    const socket = req.socket;
    this.#idleSince.delete(socket);
    res.once('close', () => {
      this.#inFlight.delete(controller);
      if (!socket.destroyed) this.#idleSince.set(socket, performance.now());
      if (!res.writableFinished) controller.abort(new Error('client closed the connection'));
    });
    const startedMs = performance.now();
    const requestId = requestIdOf(req.headers[REQUEST_ID_METADATA_KEY]);
    const header = (name: string): string | undefined => {
      const value = req.headers[name];
      return typeof value === 'string' ? value : undefined;
    };
    const context: CallContext = {
      signal: controller.signal,
      header,
      ...(requestId === undefined ? {} : { requestId }),
    };
    const x: Exchange = { req, res, path, context };
    try {
      if (route === undefined) {
        this.#send(res, errorReply('SLUICE_ERR_PROTOCOL_BAD_REQUEST', `no route for ${path}`, 404));
      } else if (!route.methods.includes(req.method as Method)) {
        const allow = route.methods.join(', ');
        this.#send(res, {
          ...errorReply(
            'SLUICE_ERR_PROTOCOL_BAD_REQUEST',
            `${path} accepts ${allow}, not ${req.method}`,
            405,
          ),
          headers: { allow },
        });
      } else {
        await route.run(x);
      }
    } catch (error) {
      const { reply, unexpected } = toErrorReply(error);
      this.#send(res, reply);
      if (unexpected) this.#report(error, path);
    } finally {
      if (route?.rpc !== undefined && route.methods.includes(req.method as Method)) {
        const durationMs = performance.now() - startedMs;
        this.#options.metrics?.observeDecisionDuration(TRANSPORT, route.rpc, durationMs);
      }
    }
  }

  /** The parsed JSON body, or `undefined` when an answer (413) was already sent. */
  async #json(x: Exchange): Promise<unknown> {
    const result = await readBody(x.req, this.#maxBodyBytes, DRAIN_BYTES);
    if (result.kind === 'aborted') return undefined;
    if (result.kind === 'too-large') {
      this.#send(
        x.res,
        errorReply(
          'SLUICE_ERR_PROTOCOL_BAD_REQUEST',
          `the request body is larger than ${this.#maxBodyBytes} bytes`,
          413,
        ),
        true,
      );
      return undefined;
    }
    return parseJson(result.body);
  }

  async #rls(x: Exchange): Promise<void> {
    const body = await this.#json(x);
    if (body === undefined) return;
    const request = decodeRlsJson(body, this.#limits);
    const response = await this.#handlers.shouldRateLimit(request, x.context);
    const out = encodeRlsJson(response, request.descriptors.length);
    // As upstream: 429 when over limit, 200 otherwise (UNKNOWN is never sent).
    this.#send(x.res, json(response.overallCode === 'OVER_LIMIT' ? 429 : 200, out));
  }

  async #check(x: Exchange): Promise<void> {
    const body = await this.#json(x);
    if (body === undefined) return;
    const response = encodeCheckJson(
      await this.#handlers.check(decodeCheckJson(body, this.#limits), x.context),
    );
    const status = checkHttpStatus(response.status);
    const headers: Record<string, string> = {};
    if (status === 429 || (status === 503 && response.retryAfterMs > 0)) {
      headers['retry-after'] = String(Math.ceil(response.retryAfterMs / 1000));
    }
    this.#send(x.res, json(status, response, headers));
  }

  async #healthcheck(x: Exchange): Promise<void> {
    // As upstream: 200 "OK", or 500 with an empty body.
    this.#send(
      x.res,
      this.#healthy
        ? { status: 200, body: 'OK', contentType: TEXT_TYPE }
        : { status: 500, body: '', contentType: TEXT_TYPE },
    );
  }

  async #metrics(x: Exchange): Promise<void> {
    const metrics = this.#options.metrics;
    if (metrics === undefined) {
      this.#send(
        x.res,
        errorReply('SLUICE_ERR_PROTOCOL_BAD_REQUEST', 'metrics are not enabled', 404),
      );
      return;
    }
    const { contentType, body } = await metrics.metrics();
    this.#send(x.res, { status: 200, body, contentType });
  }

  async #status(x: Exchange): Promise<void> {
    const status = this.#options.status;
    if (status === undefined) {
      this.#send(
        x.res,
        errorReply('SLUICE_ERR_PROTOCOL_BAD_REQUEST', 'the status page is not enabled', 404),
      );
      return;
    }
    const query = new URLSearchParams((x.req.url ?? '').split('?')[1] ?? '');
    const format = query.get('format') ?? 'html';
    if (format !== 'html' && format !== 'json') {
      throw new ProtocolError(
        'SLUICE_ERR_PROTOCOL_BAD_REQUEST',
        `/status?format= accepts html or json, not ${JSON.stringify(format.slice(0, 32))}`,
      );
    }
    const snapshot = status();
    // The page loads nothing and runs nothing; the policy says so to the browser too.
    const headers = {
      'cache-control': 'no-store',
      'content-security-policy': "default-src 'none'; style-src 'unsafe-inline'",
      'x-content-type-options': 'nosniff',
    };
    this.#send(
      x.res,
      format === 'json'
        ? { ...json(200, snapshot), headers }
        : { status: 200, body: renderStatusPage(snapshot), contentType: HTML_TYPE, headers },
    );
  }

  async #rlconfig(x: Exchange): Promise<void> {
    this.#send(x.res, { status: 200, body: this.#handlers.rlconfig(), contentType: TEXT_TYPE });
  }

  #report(error: unknown, path: string): void {
    try {
      this.#options.onError?.(error, path);
    } catch {
      // A failing reporter must not take the server down.
    }
  }

  #send(res: http.ServerResponse, reply: Reply, close = false): void {
    if (res.headersSent || res.destroyed) return;
    const body = Buffer.from(reply.body, 'utf8');
    res.statusCode = reply.status;
    for (const [k, v] of Object.entries(reply.headers ?? {})) res.setHeader(k, v);
    res.setHeader('content-type', reply.contentType);
    res.setHeader('content-length', body.length);
    // While shutting down, no connection is kept for another request.
    if (close || this.#closing) res.setHeader('connection', 'close');
    res.end(body);
  }
}
