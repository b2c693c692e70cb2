/** Reading HTTP responses in the HTTP edge tests. */

/** Headers that vary per response or framework and say nothing about rate limiting. */
const NOISE = new Set(['date', 'connection', 'keep-alive', 'x-powered-by', 'etag']);

/** Every response header except {@link NOISE}, as a plain object (names lower-case). */
export function headersOf(res: Response): Record<string, string> {
  const out: Record<string, string> = {};
  res.headers.forEach((value, name) => {
    if (!NOISE.has(name)) out[name] = value;
  });
  return out;
}

/** The status, the headers that matter and the body text of a response. */
export async function snapshot(
  res: Response,
): Promise<{ status: number; headers: Record<string, string>; body: string }> {
  return { status: res.status, headers: headersOf(res), body: await res.text() };
}
