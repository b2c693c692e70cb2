/**
 * gRPC metadata keys that both ends of a Sluice connection read: the service and its
 * client, the quota controller and its agents. One place, so the two sides cannot drift.
 */

/** Trailing metadata key carrying a `SluiceError`'s code, e.g. `SLUICE_ERR_PROTOCOL_BAD_REQUEST`. */
export const ERROR_CODE_METADATA_KEY = 'sluice-error-code';

/** The caller's request id, as gRPC metadata or an HTTP header (lower case). */
export const REQUEST_ID_METADATA_KEY = 'x-request-id';

/** Metadata a Sluice agent may send to name itself; otherwise each stream is an agent. */
export const AGENT_METADATA = 'sluice-agent';

/** Initial metadata of every quota stream: the serving leader's fencing token. */
export const TOKEN_METADATA = 'sluice-fencing-token';

/**
 * The refresh period R in ms: sent by the controller in every stream's initial metadata,
 * so that agents report (and window their leases) at its period; sent by a Sluice agent
 * with its configured period, so that a mismatch is seen on both sides.
 */
export const REFRESH_METADATA = 'sluice-refresh-ms';

/**
 * Metadata a Sluice agent sends when it opens a stream: the highest fencing token it has
 * seen. A leader whose own token is lower (its Redis lost the counter, and its clock is
 * behind the one that issued that token) refuses the stream and takes a higher term.
 */
export const SEEN_TOKEN_METADATA = 'sluice-seen-token';

/**
 * Initial metadata of a quota stream whose controller signs its terms: the HMAC of its
 * fencing token. A Sluice agent keeps it with the term and sends it back, as
 * {@link SEEN_SIGNATURE_METADATA}, beside `sluice-seen-token`.
 */
export const TOKEN_SIGNATURE_METADATA = 'sluice-fencing-sig';

/** The signature of the seen term (see {@link TOKEN_SIGNATURE_METADATA}). */
export const SEEN_SIGNATURE_METADATA = 'sluice-seen-sig';
