/**
 * A loopback TCP proxy that injects network faults between a client (ioredis) and Redis.
 *
 * Every accepted client connection gets its own upstream connection to the current target.
 * Bytes flow through two ordered lanes per connection: *upstream* (client → server) and
 * *downstream* (server → client). Faults are proxy-wide switches that can be flipped at any time
 * and apply to existing and new connections alike:
 *
 * - {@link FaultProxy.setLatency} delays every chunk (and the end-of-stream) by `ms`, keeping
 *   order per lane.
 * - {@link FaultProxy.blackhole} discards chunks in a lane (the connection stays open, no FIN or
 *   RST is sent, so the peer just waits).
 * - {@link FaultProxy.dropNextReply} lets the next command reach the server and discards its
 *   reply (then, by default, resets the client connection).
 * - {@link FaultProxy.resetAll} kills current connections with RST towards the client.
 * - {@link FaultProxy.refuse} accepts and immediately resets new connections.
 * - {@link FaultProxy.setTarget} routes new connections to another backend.
 * - {@link FaultProxy.heal} clears every fault.
 *
 * Fault decisions (blackhole, dropped reply) are taken when a chunk is *delivered*, i.e. after
 * its latency, so a blackhole switched on also swallows chunks still in flight, as a real
 * partition would. Socket errors (ECONNRESET, EPIPE, ECONNREFUSED from the target) never
 * escape: an error on either side tears that one connection down (RST to the client, close
 * upstream) regardless of faults.
 *
 * Proxies are tracked per process; on process exit any still open is closed. Tests should still
 * call {@link FaultProxy.close} (or {@link closeAllFaultProxies}) in `afterAll`.
 */
import net from 'node:net';
import { performance } from 'node:perf_hooks';

const HOST = '127.0.0.1';
/** Default {@link DropNextReplyOptions.windowMs}. */
const DEFAULT_DROP_WINDOW_MS = 50;

/** Where a proxy forwards connections to. */
export interface ProxyTarget {
  /** Host of the backend, e.g. `127.0.0.1`. */
  readonly host: string;
  /** TCP port of the backend. */
  readonly port: number;
}

/**
 * A traffic direction: `upstream` is client → server (commands), `downstream` is server →
 * client (replies), `both` is both.
 */
export type FaultDirection = 'both' | 'upstream' | 'downstream';

/** Options for {@link FaultProxy.dropNextReply}. */
export interface DropNextReplyOptions {
  /**
   * Reset the client connection (RST; the upstream side is closed) as soon as the first chunk
   * of the reply has been discarded. This is what a real lost reply looks like to a client: the
   * command was applied, the reply never came, the connection died. Without it the connection
   * lives on and the client's RESP stream is out of step with its commands (the next reply it
   * reads answers a later command). @default true
   */
  thenReset?: boolean;
  /**
   * Only with `thenReset: false`: after at least one reply chunk has been discarded, dropping
   * also ends when no server → client data has arrived for this long (besides ending when the
   * client sends again). @default 50
   */
  windowMs?: number;
}

/** Options for {@link FaultProxy.setTarget}. */
export interface SetTargetOptions {
  /** Also {@link FaultProxy.resetAll} so existing connections reconnect to the new target. */
  resetExisting?: boolean;
}

/** Counters returned by {@link FaultProxy.stats}; all are totals since the proxy started. */
export interface FaultProxyStats {
  /** Client connections accepted and forwarded (refused ones are not counted here). */
  accepted: number;
  /** Client connections accepted and immediately reset because {@link FaultProxy.refuse} was on. */
  refused: number;
  /** Connections currently open (client side or upstream side still alive). */
  active: number;
  /** Bytes forwarded client → server. */
  bytesUp: number;
  /** Bytes forwarded server → client. */
  bytesDown: number;
  /** Bytes discarded client → server (blackhole). */
  bytesDroppedUp: number;
  /** Bytes discarded server → client (blackhole or dropped reply). */
  bytesDroppedDown: number;
  /** `bytesDroppedUp + bytesDroppedDown`. */
  bytesDropped: number;
  /** Chunks (either direction) that were queued with a latency greater than zero. */
  chunksDelayed: number;
  /** Replies discarded by {@link FaultProxy.dropNextReply} (one per triggered drop). */
  repliesDropped: number;
  /** Connections reset by the proxy: {@link FaultProxy.resetAll}, `thenReset`, errors. */
  resets: number;
}

type Lane = 'upstream' | 'downstream';

/** Mutable state shared by a proxy and its connections. */
class FaultState {
  target: ProxyTarget;
  latencyMs = 0;
  blackholeUp = false;
  blackholeDown = false;
  refusing = false;
  pendingDrop: Required<DropNextReplyOptions> | undefined;
  readonly stats: Omit<FaultProxyStats, 'active' | 'bytesDropped'> = {
    accepted: 0,
    refused: 0,
    bytesUp: 0,
    bytesDown: 0,
    bytesDroppedUp: 0,
    bytesDroppedDown: 0,
    chunksDelayed: 0,
    repliesDropped: 0,
    resets: 0,
  };

  constructor(target: ProxyTarget) {
    this.target = { host: target.host, port: target.port };
  }

  blackholed(lane: Lane): boolean {
    return lane === 'upstream' ? this.blackholeUp : this.blackholeDown;
  }
}

/** An item in a lane: a data chunk, or `null` for the end of the stream (FIN). */
interface Queued {
  chunk: Buffer | null;
  due: number;
}

/** An ordered, optionally delayed, one-way stream from `source` to `sink`. */
class Pipe {
  private readonly queue: Queued[] = [];
  private timer: NodeJS.Timeout | undefined;
  private paused = false;

  constructor(
    private readonly link: Link,
    private readonly lane: Lane,
    private readonly source: net.Socket,
    private readonly sink: net.Socket,
  ) {}

  push(chunk: Buffer | null): void {
    if (this.link.closed) return;
    const latency = this.link.state.latencyMs;
    if (latency <= 0 && this.queue.length === 0) {
      this.deliver(chunk);
      return;
    }
    if (latency > 0 && chunk !== null) this.link.state.stats.chunksDelayed += 1;
    this.queue.push({ chunk, due: performance.now() + Math.max(0, latency) });
    this.schedule();
  }

  stop(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    this.queue.length = 0;
  }

  private schedule(): void {
    if (this.timer !== undefined) return;
    const head = this.queue[0];
    if (!head) return;
    const wait = Math.max(0, Math.ceil(head.due - performance.now()));
    this.timer = setTimeout(() => this.pump(), wait);
  }

  private pump(): void {
    this.timer = undefined;
    const now = performance.now();
    for (;;) {
      if (this.link.closed) return;
      const head = this.queue[0];
      if (!head) return;
      if (head.due > now) break;
      this.queue.shift();
      this.deliver(head.chunk);
    }
    this.schedule();
  }

  private deliver(chunk: Buffer | null): void {
    const { state } = this.link;
    if (this.link.closed) return;
    if (chunk === null) {
      // A partition hides the FIN too: the peer keeps waiting.
      if (!state.blackholed(this.lane) && !this.sink.destroyed) this.sink.end();
      return;
    }
    if (state.blackholed(this.lane)) {
      if (this.lane === 'upstream') state.stats.bytesDroppedUp += chunk.length;
      else state.stats.bytesDroppedDown += chunk.length;
      return;
    }
    if (!this.link.admit(this.lane, chunk)) return;
    if (this.sink.destroyed || this.sink.writableEnded) return;
    if (this.lane === 'upstream') state.stats.bytesUp += chunk.length;
    else state.stats.bytesDown += chunk.length;
    if (!this.sink.write(chunk) && !this.paused) {
      this.paused = true;
      this.source.pause();
      this.sink.once('drain', () => {
        this.paused = false;
        this.source.resume();
      });
    }
  }
}

/** State of a {@link FaultProxy.dropNextReply} armed on one connection. */
interface DropInProgress {
  thenReset: boolean;
  windowMs: number;
  droppedChunks: number;
  timer: NodeJS.Timeout | undefined;
}

/** One proxied connection: a client socket, its upstream socket and two pipes. */
class Link {
  closed = false;
  private readonly up: Pipe;
  private readonly down: Pipe;
  private drop: DropInProgress | undefined;
  private openSockets = 2;

  constructor(
    readonly state: FaultState,
    readonly client: net.Socket,
    readonly upstream: net.Socket,
    private readonly onClosed: (link: Link) => void,
  ) {
    this.up = new Pipe(this, 'upstream', client, upstream);
    this.down = new Pipe(this, 'downstream', upstream, client);
    for (const socket of [client, upstream]) {
      socket.setNoDelay(true);
      socket.on('error', () => this.reset());
      socket.on('close', () => {
        this.openSockets -= 1;
        if (this.openSockets === 0) this.finish();
      });
    }
    client.on('data', (chunk: Buffer) => this.up.push(chunk));
    client.on('end', () => this.up.push(null));
    upstream.on('data', (chunk: Buffer) => this.down.push(chunk));
    upstream.on('end', () => this.down.push(null));
  }

  /**
   * Called for each chunk about to be written (after blackhole checks); returns false to
   * discard it. Implements {@link FaultProxy.dropNextReply}.
   */
  admit(lane: Lane, chunk: Buffer): boolean {
    const { state } = this;
    if (lane === 'upstream') {
      // The client sent again after (part of) the lost reply was dropped: stop dropping.
      if (this.drop && this.drop.droppedChunks > 0) this.endDrop();
      const pending = state.pendingDrop;
      if (pending) {
        state.pendingDrop = undefined;
        this.endDrop();
        this.drop = { ...pending, droppedChunks: 0, timer: undefined };
      }
      return true;
    }
    const drop = this.drop;
    if (!drop) return true;
    drop.droppedChunks += 1;
    if (drop.droppedChunks === 1) state.stats.repliesDropped += 1;
    state.stats.bytesDroppedDown += chunk.length;
    if (drop.thenReset) {
      this.reset();
    } else {
      clearTimeout(drop.timer);
      drop.timer = setTimeout(() => {
        if (this.drop === drop) this.endDrop();
      }, drop.windowMs);
    }
    return false;
  }

  /** Stops an in-progress dropped reply on this connection. */
  endDrop(): void {
    if (this.drop) clearTimeout(this.drop.timer);
    this.drop = undefined;
  }

  /** RST towards the client, close the upstream side, forget queued data. */
  reset(): void {
    if (this.closed) return;
    this.state.stats.resets += 1;
    this.finish();
    if (!this.client.destroyed) this.client.resetAndDestroy();
    this.upstream.destroy();
  }

  /** Immediate teardown without counting a reset (proxy close). */
  destroy(): void {
    this.finish();
    this.client.destroy();
    this.upstream.destroy();
  }

  private finish(): void {
    if (this.closed) return;
    this.closed = true;
    this.endDrop();
    this.up.stop();
    this.down.stop();
    this.onClosed(this);
  }
}

const registry = new Set<FaultProxy>();
let exitHookInstalled = false;

function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.on('exit', () => {
    for (const proxy of registry) proxy.destroySync();
  });
}

/**
 * A fault-injecting TCP proxy on 127.0.0.1 in front of one Redis server (or any TCP service).
 *
 * @example
 * const proxy = await FaultProxy.start(server);   // a RedisServer is a ProxyTarget
 * const redis = new Redis(proxy.port, proxy.host, { commandTimeout: 200 });
 * proxy.blackhole('upstream');                    // commands never reach Redis
 * await expect(redis.incr('n')).rejects.toThrow(/timed out/);
 * proxy.heal();
 * await proxy.close();
 */
export class FaultProxy {
  /** Always `127.0.0.1`. */
  readonly host: string = HOST;
  /** The port the proxy listens on (chosen by the kernel; never races with another bind). */
  readonly port: number;
  /** `redis://127.0.0.1:<port>`. */
  readonly url: string;

  private readonly state: FaultState;
  private readonly server: net.Server;
  private readonly links = new Set<Link>();
  private closing: Promise<void> | undefined;

  private constructor(server: net.Server, port: number, state: FaultState) {
    this.server = server;
    this.port = port;
    this.url = `redis://${HOST}:${port}`;
    this.state = state;
  }

  /**
   * Starts a proxy listening on a free port of 127.0.0.1 that forwards each new connection to
   * `target`. Only `host` and `port` of `target` are read (a `RedisServer` can be passed).
   */
  static async start(target: ProxyTarget): Promise<FaultProxy> {
    installExitHook();
    const state = new FaultState(target);
    const server = net.createServer({ allowHalfOpen: true, pauseOnConnect: false });
    const port = await new Promise<number>((resolve, reject) => {
      server.once('error', reject);
      server.listen({ host: HOST, port: 0, exclusive: true }, () => {
        server.off('error', reject);
        const address = server.address();
        if (address === null || typeof address === 'string') {
          server.close();
          reject(new Error(`unexpected listener address ${String(address)}`));
          return;
        }
        resolve(address.port);
      });
    });
    // Accept errors (EMFILE…) must not crash the test process.
    server.on('error', () => undefined);
    const proxy = new FaultProxy(server, port, state);
    server.on('connection', (socket) => proxy.accept(socket));
    registry.add(proxy);
    return proxy;
  }

  /** The backend that new connections go to. */
  get target(): ProxyTarget {
    return { ...this.state.target };
  }

  /**
   * Delays every chunk in both directions (and the end-of-stream) by `ms`, preserving order per
   * direction; `0` turns latency off. Applies to chunks arriving from now on; chunks already
   * queued keep their schedule (so lowering the latency never reorders).
   */
  setLatency(ms: number): void {
    if (!Number.isFinite(ms) || ms < 0) throw new RangeError(`latency must be ≥ 0, got ${ms}`);
    this.state.latencyMs = ms;
  }

  /**
   * Discards (does not buffer) every chunk delivered in `direction` from now on, on existing and
   * new connections, until {@link FaultProxy.heal}. `upstream`: commands never reach the server.
   * `downstream`: replies never reach the client. No FIN or RST is sent (a FIN from the
   * blackholed side is swallowed too), so the peer just waits. Calls are cumulative:
   * `blackhole('upstream')` then `blackhole('downstream')` equals `blackhole('both')`.
   */
  blackhole(direction: FaultDirection = 'both'): void {
    if (direction === 'both' || direction === 'upstream') this.state.blackholeUp = true;
    if (direction === 'both' || direction === 'downstream') this.state.blackholeDown = true;
  }

  /**
   * Lets the next command reach the server and loses its reply. One-shot: arms on the first
   * client → server chunk forwarded after this call, on whichever connection sends it (that
   * chunk may carry several pipelined commands; all their replies are lost). From then on,
   * server → client data on that connection is discarded:
   *
   * - `thenReset: true` (default): as soon as the first reply chunk has been discarded, the
   *   client connection is reset (RST) and the upstream side closed. Since Redis had already
   *   replied, the command was certainly applied.
   * - `thenReset: false`: discarding continues until, after at least one chunk was discarded,
   *   the client sends another chunk or `windowMs` pass without server → client data. The
   *   connection stays up but its RESP stream is out of step.
   *
   * A chunk swallowed by an upstream blackhole does not arm it (that command never reached the
   * server). {@link FaultProxy.heal} disarms it.
   */
  dropNextReply(options: DropNextReplyOptions = {}): void {
    this.state.pendingDrop = {
      thenReset: options.thenReset ?? true,
      windowMs: options.windowMs ?? DEFAULT_DROP_WINDOW_MS,
    };
  }

  /**
   * Destroys every current connection: RST towards the client (`socket.resetAndDestroy()`),
   * close towards the server. Queued (delayed) data is discarded. New connections are accepted
   * as usual.
   */
  resetAll(): void {
    for (const link of [...this.links]) link.reset();
  }

  /**
   * While `on`, new connections are accepted and immediately reset (RST), so clients see
   * ECONNRESET right after connecting. Existing connections are not affected.
   */
  refuse(on: boolean): void {
    this.state.refusing = on;
  }

  /**
   * Routes new connections to `target` (e.g. a promoted replica). Existing connections stay on
   * the old backend unless `resetExisting` (or a later {@link FaultProxy.resetAll}).
   */
  setTarget(target: ProxyTarget, options: SetTargetOptions = {}): void {
    this.state.target = { host: target.host, port: target.port };
    if (options.resetExisting) this.resetAll();
  }

  /**
   * Clears every fault: latency 0, no blackhole, no refusal, any armed or in-progress
   * {@link FaultProxy.dropNextReply} cancelled. The target is kept; chunks already delayed are
   * still delivered on their schedule; data discarded while faulty is gone for good.
   */
  heal(): void {
    const { state } = this;
    state.latencyMs = 0;
    state.blackholeUp = false;
    state.blackholeDown = false;
    state.refusing = false;
    state.pendingDrop = undefined;
    for (const link of this.links) link.endDrop();
  }

  /** A snapshot of the proxy's counters. */
  stats(): FaultProxyStats {
    const { stats } = this.state;
    return {
      ...stats,
      active: this.links.size,
      bytesDropped: stats.bytesDroppedUp + stats.bytesDroppedDown,
    };
  }

  /**
   * Stops listening and destroys every connection; resolves when the listener is closed.
   * Idempotent.
   */
  close(): Promise<void> {
    if (!this.closing) {
      registry.delete(this);
      this.closing = new Promise<void>((resolve) => {
        this.server.close(() => resolve());
        for (const link of [...this.links]) link.destroy();
      });
    }
    return this.closing;
  }

  /** @internal Synchronous best-effort teardown for the process exit hook. */
  destroySync(): void {
    registry.delete(this);
    for (const link of [...this.links]) link.destroy();
    try {
      this.server.close();
    } catch {
      // already closed
    }
  }

  private accept(client: net.Socket): void {
    client.on('error', () => undefined);
    if (this.state.refusing || this.closing) {
      if (!this.closing) this.state.stats.refused += 1;
      client.resetAndDestroy();
      return;
    }
    this.state.stats.accepted += 1;
    const { host, port } = this.state.target;
    const upstream = net.connect({ host, port, allowHalfOpen: true });
    upstream.on('error', () => undefined);
    const link = new Link(this.state, client, upstream, (done) => this.links.delete(done));
    this.links.add(link);
  }
}

/** Closes every proxy this process started and has not closed yet. Handy in `afterAll`. */
export async function closeAllFaultProxies(): Promise<void> {
  await Promise.all([...registry].map((proxy) => proxy.close()));
}
