import { ERROR_CODES, type ErrorCode } from '../../core/error-codes.js';
import { ProtocolError, SluiceError } from '../../core/errors.js';

/** The `error` sent for failures that are not `SluiceError`s: their text stays in the server. */
export const INTERNAL_ERROR_MESSAGE = 'internal error';

export const JSON_TYPE = 'application/json';

/** A response the routes build; `send` writes it. */
export interface Reply {
  readonly status: number;
  readonly body: string;
  readonly contentType: string;
  readonly headers?: Readonly<Record<string, string>>;
}

export function json(status: number, value: unknown, headers?: Record<string, string>): Reply {
  return {
    status,
    body: JSON.stringify(value),
    contentType: JSON_TYPE,
    ...(headers ? { headers } : {}),
  };
}

/** `{"error": message, "code": code}` with the code's registry status unless one is given. */
export function errorReply(
  code: ErrorCode,
  message: string,
  status = ERROR_CODES[code].httpStatus,
): Reply {
  return json(status, { error: message, code });
}

// Only these errors' messages are meant for clients; anything else may carry secrets.
export function toErrorReply(error: unknown): { reply: Reply; unexpected: boolean } {
  if (error instanceof SluiceError)
    return { reply: errorReply(error.code, error.message), unexpected: false };
  return { reply: json(500, { error: INTERNAL_ERROR_MESSAGE }), unexpected: true };
}

const utf8 = new TextDecoder('utf-8', { fatal: true });

export function parseJson(body: Buffer): unknown {
  let text: string;
  try {
    text = utf8.decode(body);
  } catch (cause) {
    throw new ProtocolError(
      'SLUICE_ERR_PROTOCOL_BAD_REQUEST',
      'the request body is not valid UTF-8',
      { cause },
    );
  }
  try {
    return JSON.parse(text) as unknown;
  } catch (cause) {
    const detail = cause instanceof SyntaxError ? `: ${cause.message}` : '';
    throw new ProtocolError(
      'SLUICE_ERR_PROTOCOL_BAD_REQUEST',
      `the request body is not valid JSON${detail}`,
      {
        cause,
      },
    );
  }
}
