import { PolicyError } from '../core/errors.js';

/**
 * A reservation id carries everything a settle needs, so that any process can settle it
 * and no store has to keep a record per reservation (only the once-only marker that a
 * settle writes): the buckets it charged (policy name and bucket key), the estimate, when
 * it was reserved and until when it may be settled, and the nonce its settle is
 * deduplicated under. It is not signed: whoever may call the limiter may settle, as they
 * may check (docs/costs.md).
 */
export interface ReservationTicket {
  /** The settle's once-only id: the reserve's `requestId`, else a random UUID. */
  readonly nonce: string;
  /** The limiter clock's reading at the reserve. */
  readonly reservedAtMs: number;
  /** After this instant (the settling limiter's clock) it can no longer be settled. */
  readonly expiresAtMs: number;
  /** Units reserved in each bucket. */
  readonly estimate: number;
  /** Each bucket the reserve charged: its policy's name and its bucket key. */
  readonly buckets: readonly (readonly [policy: string, key: string])[];
}

/** The id's prefix: its format's version. */
const PREFIX = 'rsv1.';

/** The id of `ticket`: `rsv1.` then base64url JSON (URL- and header-safe). */
export function reservationId(t: ReservationTicket): string {
  const body = [t.nonce, t.reservedAtMs, t.expiresAtMs, t.estimate, t.buckets];
  return PREFIX + Buffer.from(JSON.stringify(body), 'utf8').toString('base64url');
}

/** The ticket of `id`; a `PolicyError` (`SLUICE_ERR_RESERVATION_INVALID`) when it is none. */
export function readReservationId(id: unknown): ReservationTicket {
  if (typeof id !== 'string' || !id.startsWith(PREFIX))
    throw invalid('it is not a Sluice reservation id');
  let body: unknown;
  try {
    body = JSON.parse(Buffer.from(id.slice(PREFIX.length), 'base64url').toString('utf8'));
  } catch {
    throw invalid('its body is not readable');
  }
  if (!Array.isArray(body) || body.length !== 5) throw invalid('its body has the wrong shape');
  const [nonce, reservedAtMs, expiresAtMs, estimate, buckets] = body as unknown[];
  const finite = (x: unknown): x is number => typeof x === 'number' && Number.isFinite(x);
  const pair = (b: unknown): b is [string, string] =>
    Array.isArray(b) && b.length === 2 && typeof b[0] === 'string' && typeof b[1] === 'string';
  if (
    typeof nonce !== 'string' ||
    nonce.length === 0 ||
    !finite(reservedAtMs) ||
    !finite(expiresAtMs) ||
    !Number.isSafeInteger(estimate) ||
    (estimate as number) < 0 ||
    !Array.isArray(buckets) ||
    !buckets.every(pair)
  ) {
    throw invalid('its fields are not valid');
  }
  return { nonce, reservedAtMs, expiresAtMs, estimate: estimate as number, buckets };
}

function invalid(why: string): PolicyError {
  return new PolicyError('SLUICE_ERR_RESERVATION_INVALID', `invalid reservation id: ${why}`);
}
