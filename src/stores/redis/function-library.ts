import { createHash } from 'node:crypto';
import { Cluster, type Redis } from 'ioredis';

/** Where the library stands on the connection's server(s). */
export type FunctionLibraryState = 'loading' | 'loaded' | 'unsupported';

/**
 * A Lua function loaded as a Redis Functions library (Redis 7+), so its call is `FCALL`:
 * the server keeps the library's definitions between calls, where `EVALSHA` runs the
 * whole script body (every algorithm's definition) again on each call.
 *
 * The library's name carries a hash of its source, so Sluice versions sharing a server
 * never replace each other's code (`FUNCTION LOAD` without `REPLACE`; "already exists"
 * means loaded). It is loaded whenever the client becomes ready, on every primary of a
 * Cluster; primaries pass it on to their replicas and keep it in RDB/AOF. Until it is
 * loaded, and on servers without Functions (before 7.0) or without the ACL permission,
 * callers use `EVALSHA` (see `state`). A call that finds no function (a `FUNCTION FLUSH`,
 * a new primary) did not run: the caller may send it again by `EVALSHA`, and the library
 * is loaded again (`missing`).
 */
export class FunctionLibrary {
  readonly #client: Redis | Cluster;
  readonly #source: string;
  readonly #name: string;
  #state: FunctionLibraryState = 'loading';
  #loads = 0;

  /**
   * @param body the Lua text defining the local function `entry`
   * @param entry the name of that function in `body`
   */
  constructor(client: Redis | Cluster, body: string, entry: string) {
    const version = createHash('sha1').update(body).digest('hex').slice(0, 16);
    this.#client = client;
    this.#name = `sluice_${entry}_${version}`;
    this.#source = `#!lua name=${this.#name}\n${body}\nredis.register_function('${this.#name}', ${entry})\n`;
    client.on('ready', () => this.#load());
    if (client.status === 'ready') this.#load();
  }

  /** The function's (and the library's) name, as FCALL takes it. */
  get name(): string {
    return this.#name;
  }

  /** `loaded` once every primary has the library; callers use FCALL only then. */
  get state(): FunctionLibraryState {
    return this.#state;
  }

  /** Calls the function with binary replies (packed doubles would not survive text decoding). */
  call(keys: readonly string[], args: readonly (string | number | Buffer)[]): Promise<unknown> {
    return this.#client.callBuffer('FCALL', this.#name, keys.length, ...keys, ...args);
  }

  /** Whether `error` is Redis saying the function does not exist there (the call did not run). */
  static isMissing(error: unknown): boolean {
    return error instanceof Error && /Function not found/i.test(error.message);
  }

  /** A call found no function: use EVALSHA until the library is loaded again. */
  missing(): void {
    if (this.#state !== 'loaded') return;
    this.#state = 'loading';
    this.#load();
  }

  #load(): void {
    const load = ++this.#loads;
    const nodes = this.#client instanceof Cluster ? this.#client.nodes('master') : [this.#client];
    Promise.all(nodes.map((node) => this.#loadOn(node))).then(
      (states) => {
        if (load !== this.#loads) return; // a newer load decides
        this.#state = states.includes('unsupported')
          ? 'unsupported'
          : states.every((s) => s === 'loaded')
            ? 'loaded'
            : 'loading';
      },
      () => undefined,
    );
  }

  /** Loads the library on one server: `loading` when the attempt failed for now (connection). */
  async #loadOn(node: Redis): Promise<FunctionLibraryState> {
    try {
      await node.call('FUNCTION', 'LOAD', this.#source);
      return 'loaded';
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error);
      if (/already exists/i.test(message)) return 'loaded';
      // Before Redis 7 (unknown command), or an ACL without FUNCTION: EVALSHA for good.
      if (/unknown command|NOPERM|no permissions/i.test(message)) return 'unsupported';
      return 'loading';
    }
  }
}
