import { readFileSync } from 'node:fs';
import type { Redis } from 'ioredis';

/**
 * Leader election for quota controllers on a Redis lease key, with a fencing token; no
 * consensus of our own. All keys share one hash tag, so they sit in one Cluster slot.
 *
 * - `{p}:leader` holds `<token>:<id>` while a controller leads; it expires after `ttlMs`
 *   unless renewed.
 * - `{p}:token` holds the last fencing token. A new leader takes the larger of the stored
 *   token + 1 and a floor it brings (its clock in ms, or a higher term an agent has seen,
 *   whichever is larger), so the term does not go back when Redis loses the counter
 *   (restart without persistence, FLUSHALL, a failover to a replica without the key, a
 *   changed prefix): see docs/quota-leases.md, "Fencing across Redis loss".
 * - `{p}:state` is the controller state, written only by the holder of `{p}:leader`.
 *
 * Acquire is `SET {p}:leader NX PX ttl` and, when that succeeds, the token step above, in
 * one script. Renewal and state writes check that `{p}:leader` still holds this controller's
 * value, in the same script that acts, so a deposed leader can neither extend its term
 * nor overwrite its successor's state. A leader persists a round's state before it sends
 * the round's leases, so its successor knows every lease it may have sent.
 */

/** A script of lua/, read once when the module loads. */
function lua(name: string): string {
  return readFileSync(new URL(`./lua/${name}.lua`, import.meta.url), 'utf8');
}
const ACQUIRE = lua('acquire');
const RENEW = lua('renew');
const WRITE_STATE = lua('write-state');
const RESIGN = lua('resign');

/** The Redis calls the leader lease makes. */
export type LeaderRedis = Pick<Redis, 'eval' | 'get' | 'pttl'>;

/** One controller's side of the election. */
export class LeaderLease {
  readonly #redis: LeaderRedis;
  readonly #stateRedis: LeaderRedis;
  readonly #keys: { leader: string; token: string; state: string };
  readonly #id: string;
  readonly #ttlMs: number;
  #value: string | undefined;
  #token = 0;

  /**
   * @param prefix key prefix; keys are `{prefix}:leader`, `{prefix}:token`, `{prefix}:state`.
   * @param id this controller's name (unique among controllers).
   * @param ttlMs how long a term lasts without renewal.
   * @param stateRedis the connection for the state (big writes), so that they never queue
   *   in front of a renewal on `redis`. @default redis
   */
  constructor(
    redis: LeaderRedis,
    prefix: string,
    id: string,
    ttlMs: number,
    stateRedis: LeaderRedis = redis,
  ) {
    this.#redis = redis;
    this.#stateRedis = stateRedis;
    const tag = `{${prefix}}`;
    this.#keys = { leader: `${tag}:leader`, token: `${tag}:token`, state: `${tag}:state` };
    this.#id = id;
    this.#ttlMs = ttlMs;
  }

  /** This controller's fencing token while it leads; 0 otherwise. */
  get token(): number {
    return this.#value === undefined ? 0 : this.#token;
  }

  /**
   * Tries to become leader; returns the new fencing token, or 0 if another leads. The
   * token is above the stored one and at least `floor` (a whole number below 2^53).
   */
  async acquire(floor = 0): Promise<number> {
    const token = Number(
      await this.#redis.eval(
        ACQUIRE,
        2,
        this.#keys.leader,
        this.#keys.token,
        this.#id,
        this.#ttlMs,
        String(Math.floor(floor)),
      ),
    );
    if (token > 0) {
      this.#token = token;
      this.#value = `${token}:${this.#id}`;
    }
    return token;
  }

  /**
   * Extends the term; false once the term is lost (then the caller must stop leading). A
   * key that ran out is taken back when no controller has taken a term since (the stored
   * token is still this one), so a leader whose loop was held past E by its own load
   * keeps its term rather than starting a new one.
   */
  async renew(): Promise<boolean> {
    if (this.#value === undefined) return false;
    const ok =
      Number(
        await this.#redis.eval(
          RENEW,
          2,
          this.#keys.leader,
          this.#keys.token,
          this.#value,
          this.#ttlMs,
          String(this.#token),
        ),
      ) === 1;
    if (!ok) this.#value = undefined;
    return ok;
  }

  /** Writes the state if still leader; false (and no write) once the term is lost. */
  async writeState(json: string): Promise<boolean> {
    if (this.#value === undefined) return false;
    const ok =
      Number(
        await this.#stateRedis.eval(
          WRITE_STATE,
          2,
          this.#keys.leader,
          this.#keys.state,
          this.#value,
          json,
        ),
      ) === 1;
    if (!ok) this.#value = undefined;
    return ok;
  }

  /** Who leads now, as `<token>:<id>`, if anyone. */
  async leader(): Promise<string | null> {
    return this.#redis.get(this.#keys.leader);
  }

  /** Ms until the leader key runs out: 0 when there is none, −1 if it has no expiry. */
  async leaderTtlMs(): Promise<number> {
    const ttl = Number(await this.#redis.pttl(this.#keys.leader));
    return ttl === -2 ? 0 : ttl;
  }

  /** The last state a leader wrote, if any. */
  async readState(): Promise<string | null> {
    return this.#stateRedis.get(this.#keys.state);
  }

  /** Gives the term up at once (on shutdown), if still held. */
  async resign(): Promise<void> {
    if (this.#value === undefined) return;
    const value = this.#value;
    this.#value = undefined;
    await this.#redis.eval(RESIGN, 1, this.#keys.leader, value);
  }
}
