import type { IncomingMessage } from 'node:http';

/** How reading a request body ended. */
export type BodyResult =
  | { readonly kind: 'ok'; readonly body: Buffer }
  | { readonly kind: 'too-large' }
  | { readonly kind: 'aborted' };

/**
 * Reads a request body of at most `maxBytes`. A larger body (by `Content-Length` or by
 * count) is not kept: the rest is read and dropped so the client, which may still be
 * sending, can read the 413 that follows instead of seeing its upload reset. A body
 * declared longer than `maxBytes + drainBytes` is `too-large` at once, unread (answer it
 * with `Connection: close`); a client that sends more than `drainBytes` past the limit
 * without declaring it has its connection destroyed (`aborted`). Never rejects.
 */
export function readBody(
  req: IncomingMessage,
  maxBytes: number,
  drainBytes: number,
): Promise<BodyResult> {
  return new Promise((resolve) => {
    const declared = Number(req.headers['content-length']);
    if (Number.isFinite(declared) && declared > maxBytes + drainBytes) {
      resolve({ kind: 'too-large' });
      return;
    }
    let tooLarge = Number.isFinite(declared) && declared > maxBytes;
    const chunks: Buffer[] = [];
    let received = 0;
    const done = (result: BodyResult): void => {
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('error', onError);
      req.off('close', onClose);
      resolve(result);
    };
    const onData = (chunk: Buffer): void => {
      received += chunk.length;
      if (received > maxBytes) tooLarge = true;
      if (!tooLarge) chunks.push(chunk);
      else if (received > maxBytes + drainBytes) {
        req.destroy();
        done({ kind: 'aborted' });
      }
    };
    const onEnd = (): void =>
      done(
        tooLarge ? { kind: 'too-large' } : { kind: 'ok', body: Buffer.concat(chunks, received) },
      );
    const onError = (): void => done({ kind: 'aborted' });
    const onClose = (): void => {
      if (!req.complete) done({ kind: 'aborted' });
    };
    req.on('data', onData);
    req.on('end', onEnd);
    req.on('error', onError);
    req.on('close', onClose);
  });
}
