import type { Redis } from 'ioredis';
import { StoreError } from '../../core/errors.js';

/** What the guard knows of the server's role. */
type Role =
  | { readonly kind: 'unknown' }
  | { readonly kind: 'primary' }
  | { readonly kind: 'refused'; readonly error: StoreError };

const UNKNOWN: Role = Object.freeze({ kind: 'unknown' });
const PRIMARY: Role = Object.freeze({ kind: 'primary' });

/** The refusal for a server that says it is not a primary. */
export function replicaRefusal(server: string, role: readonly unknown[]): StoreError {
  const kind = String(role[0]);
  const of =
    kind === 'slave' || kind === 'replica'
      ? ` of ${String(role[1])}:${String(role[2])} (link ${String(role[3])})`
      : '';
  return new StoreError(
    'SLUICE_ERR_STORE_REPLICA',
    `Redis at ${server} is a ${kind === 'slave' ? 'replica' : kind}${of}: the store decides only on a primary, never on a copy that may be stale`,
    { reason: 'readonly' },
  );
}

/**
 * Makes sure a standalone connection talks to a primary before, and while, the store
 * decides on it. A replica's state lags its primary's, so a decision there could admit
 * what the primary has already spent; Redis refuses the script's writes on a read-only
 * replica, but not on one with `replica-read-only no`, and it tells no client when a
 * primary is demoted under it.
 *
 * So after each connect the guard asks `ROLE` and lets calls through only once the reply
 * says `master`; any other role is a refusal (`SLUICE_ERR_STORE_REPLICA`) that calls fail
 * with. It asks again every `intervalMs` and at once after a `READONLY` reply (the
 * demotion under a read-only replica), so a refused server that is promoted is used again,
 * and a primary demoted under a writable replica stops deciding within `intervalMs`.
 * `ROLE` goes on the store's own connection: it is answered in order with the scripts,
 * so a reply saying `master` proves the scripts sent before it ran on a primary.
 */
export class PrimaryGuard {
  readonly #client: Redis;
  readonly #server: string;
  #role: Role = UNKNOWN;
  #asking = false;
  readonly #timer: NodeJS.Timeout;
  readonly #listeners = new Set<() => void>();

  constructor(client: Redis, intervalMs: number) {
    this.#client = client;
    const o = client.options;
    this.#server = o.path ?? `${o.host ?? 'localhost'}:${String(o.port ?? 6379)}`;
    client.on('ready', () => {
      this.#role = UNKNOWN;
      this.ask();
    });
    client.on('close', () => {
      this.#role = UNKNOWN;
    });
    this.#timer = setInterval(() => {
      if (this.#client.status === 'ready') this.ask();
    }, intervalMs);
    this.#timer.unref();
  }

  /** Whether the last `ROLE` reply on the current connection said `master`. */
  get primary(): boolean {
    return this.#role.kind === 'primary';
  }

  /** The refusal, while the server is known not to be a primary. */
  get refusal(): StoreError | undefined {
    return this.#role.kind === 'refused' ? this.#role.error : undefined;
  }

  /** Calls `listener` at each change of what is known (primary, refused); returns its removal. */
  onChange(listener: () => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /** A `READONLY` reply came back: the server may have been demoted; stop deciding and ask. */
  suspect(): void {
    if (this.#role.kind === 'primary') this.#set(UNKNOWN);
    this.ask();
  }

  /** Sends `ROLE` unless one is out; its reply settles the role. */
  ask(): void {
    if (this.#asking) return;
    this.#asking = true;
    (this.#client.call('ROLE') as Promise<unknown[]>).then(
      (reply) => {
        this.#asking = false;
        this.#set(
          reply[0] === 'master'
            ? PRIMARY
            : { kind: 'refused', error: replicaRefusal(this.#server, reply) },
        );
      },
      () => {
        // No answer says nothing about the role; the next connect or tick asks again.
        this.#asking = false;
      },
    );
  }

  close(): void {
    clearInterval(this.#timer);
  }

  #set(role: Role): void {
    const changed =
      role.kind !== this.#role.kind ||
      (role.kind === 'refused' &&
        this.#role.kind === 'refused' &&
        role.error.message !== this.#role.error.message);
    this.#role = role;
    if (changed) for (const l of [...this.#listeners]) l();
  }
}
