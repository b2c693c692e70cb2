/**
 * The longest store deadline accepted, in ms: a rate limit decision that waits longer is
 * an outage. In its own module so that `serve --help` prints it without loading the
 * settings.
 */
export const MAX_STORE_TIMEOUT_MS = 60_000;
