/**
 * Runs a round of calls against a fixed, epoch-aligned window (the service's envoy rules:
 * 100 per minute) so that all of them land in one window, without assuming how long the
 * round takes.
 */

/**
 * Runs `round` until a run starts and ends inside one epoch-aligned window of `windowMs`
 * by the wall clock (the clock Redis's `TIME` reads on this host), at most `attempts`
 * times, and resolves with that run's result. A run that straddles a boundary split its
 * calls between two windows and proves nothing about one: it is run again, so `round`
 * must use fresh keys on each attempt (it gets the attempt number).
 *
 * @throws Error when every attempt straddled a boundary.
 */
export async function inOneWindow<T>(
  windowMs: number,
  round: (attempt: number) => Promise<T>,
  attempts = 3,
): Promise<T> {
  for (let attempt = 0; attempt < attempts; attempt++) {
    const startedIn = Math.floor(Date.now() / windowMs);
    const result = await round(attempt);
    if (Math.floor(Date.now() / windowMs) === startedIn) return result;
  }
  throw new Error(`every one of ${attempts} rounds straddled a ${windowMs} ms window boundary`);
}
