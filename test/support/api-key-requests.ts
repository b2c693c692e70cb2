/**
 * Requests as the HTTP edge tests' clients send them: identified by an `x-api-key`
 * header (`key-acme` is tenant acme in those tests).
 */

/** Init for a GET as acme. */
export const asAcme = { headers: { 'x-api-key': 'key-acme' } };

/** A POST to `url` with the API key `key`. */
export const post = (url: string, key = 'key-acme'): Promise<Response> =>
  fetch(url, { method: 'POST', headers: { 'x-api-key': key } });
