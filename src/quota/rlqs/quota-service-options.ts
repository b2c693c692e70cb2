import type { Clock } from '../../core/clock.js';
import type { AgentAuth } from './agent-auth.js';
import type { RlqsStrategyKind } from './mapping.js';
import type { PeerCaps } from './peer-caps.js';
import type { TermSigner } from './term-signature.js';

/** Options of `RlqsQuotaService` (quota-service.ts). */
export interface RlqsQuotaServiceOptions {
  /** The one domain served; streams naming another are refused. */
  readonly domain: string;
  /** @default 'token_bucket' */
  readonly strategy?: RlqsStrategyKind;
  /** Who may stream (mTLS allow-list, bearer tokens). @default anyone */
  readonly auth?: AgentAuth;
  readonly clock: Clock;
  /** Reports and problems worth a log line. @default ignore */
  readonly log?: (event: Record<string, unknown>) => void;
  /** Caps on what one peer may send (peer-caps.ts). @default DEFAULT_PEER_CAPS */
  readonly caps?: Partial<PeerCaps>;
  /**
   * A stream or message refused, by reason (`bad-request`, `not-leader`, a cap's reason,
   * `unknown-bucket` with the number of buckets given no budget). @default ignore
   */
  onRefusal?(reason: string, count?: number): void;
  /** An agent that could not be authenticated, by reason. @default ignore */
  onAuthFailure?(reason: string): void;
  /** A second live stream under an agent name already streaming. @default ignore */
  onDuplicateAgent?(agent: string): void;
  /**
   * Lines a peer can cause in a loop (a duplicate name, failed authentication) are written
   * at most once per reason per this period, with a count of those left out. @default 10000
   */
  readonly logSampleMs?: number;
  /**
   * Saves the ledger before a lease given outside a round (a newcomer's share, a lease sent
   * again after a reconnect) is sent, as a round is saved before it is sent: a successor
   * must know every lease this leader may have sent. Resolves false when the save was
   * refused; the lease then stays counted and goes out with the next round.
   */
  readonly saveBeforeSend?: () => Promise<boolean>;
  /** An agent configured with another setting than the controller's (`refresh-ms`). @default ignore */
  onSettingsMismatch?(setting: string): void;
  /**
   * An agent has seen the fencing token `seen`, above this leader's: the leader must step
   * down and lead again under a token above `seen` (the stream was refused with
   * UNAVAILABLE, so the agent comes back). @default ignore
   */
  readonly onHigherTerm?: (seen: number) => void;
  /**
   * Whether the leader's term can still be held now (its key cannot yet have run out, by
   * this process's monotonic clock). Checked before a stream is taken and before any
   * assignment is sent, so a leader that wakes from a pause hands out nothing under a
   * term a successor may hold; when false, `onTermLapsed` is called (the process renews
   * at once, and steps down if that fails), an opening stream is refused with
   * UNAVAILABLE and a report is dropped. @default always true
   */
  readonly termHeld?: () => boolean;
  readonly onTermLapsed?: () => void;
  /**
   * Signs the terms sent and checks a seen term's signature: a higher seen term whose
   * signature does not hold is ignored (logged `forged_seen_token`, sampled, and counted
   * as refusal reason `forged-seen-token`), the stream taken as any other.
   * @default none: a seen term is believed
   */
  readonly termSigner?: TermSigner;
}
