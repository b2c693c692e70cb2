/**
 * The HTTP server's connection timeouts, through a real HttpServer and raw sockets: a
 * client that trickles its request is answered 408 and cut off; an idle keep-alive
 * connection is closed. (The service-level attack is in test/service/hostile-input.test.ts.)
 */
import * as net from 'node:net';
import { describe, expect, it } from 'vitest';
import { HttpServer, type HttpHandlers } from '../../../src/service/http/http-server.js';

const handlers: HttpHandlers = {
  shouldRateLimit: () => Promise.resolve({ overallCode: 'OK', statuses: [] }),
  check: () => Promise.reject(new Error('not used')),
  rlconfig: () => '',
};

/** Sends `text` on a new connection and resolves with what came back once the server closed it. */
function exchange(port: number, text: string, trickle?: string): Promise<string> {
  return new Promise((resolve, reject) => {
    let answer = '';
    const socket = net.connect(port, '127.0.0.1', () => socket.write(text));
    const timer =
      trickle === undefined
        ? undefined
        : setInterval(() => {
            if (!socket.destroyed) socket.write(trickle);
          }, 100);
    const giveUp = setTimeout(() => {
      socket.destroy();
      reject(new Error(`the connection is still open after 10 s; got ${JSON.stringify(answer)}`));
    }, 10_000);
    socket.on('data', (d) => (answer += d.toString()));
    socket.on('error', () => undefined);
    socket.on('close', () => {
      clearInterval(timer);
      clearTimeout(giveUp);
      resolve(answer);
    });
  });
}

describe('HttpServer timeouts', () => {
  it('answers 408 to a body or headers trickled past the timeouts, and closes the connection', async () => {
    const server = new HttpServer(handlers, { headersTimeoutMs: 300, requestTimeoutMs: 600 });
    const port = await server.listen('127.0.0.1', 0);
    try {
      const [body, headers] = await Promise.all([
        exchange(port, 'POST /json HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{', ' '),
        exchange(port, 'GET /healthcheck HTTP/1.1\r\nHost: x\r\n', 'X: y\r\n'),
      ]);
      expect(body).toMatch(/^HTTP\/1\.1 408 /);
      expect(headers).toMatch(/^HTTP\/1\.1 408 /);
    } finally {
      await server.shutdown(1000);
    }
  });

  it('closes an idle keep-alive connection after keepAliveTimeoutMs', async () => {
    const server = new HttpServer(handlers, { keepAliveTimeoutMs: 1_000 });
    const port = await server.listen('127.0.0.1', 0);
    try {
      // the connection is closed by the server (Node's default would keep it 5 s, and say so)
      const answer = await exchange(port, 'GET /healthcheck HTTP/1.1\r\nHost: x\r\n\r\n');
      expect(answer).toMatch(/^HTTP\/1\.1 200 OK\r\n[^]*Keep-Alive: timeout=1\r\n[^]*OK$/);
    } finally {
      await server.shutdown(1000);
    }
  });

  it('refuses timeouts that are not positive whole numbers, or headers longer than the request', () => {
    expect(() => new HttpServer(handlers, { requestTimeoutMs: 0 })).toThrow(
      'requestTimeoutMs must be a positive whole number of ms, got 0',
    );
    expect(() => new HttpServer(handlers, { keepAliveTimeoutMs: 1.5 })).toThrow(RangeError);
    expect(
      () => new HttpServer(handlers, { headersTimeoutMs: 2_000, requestTimeoutMs: 1_000 }),
    ).toThrow('headersTimeoutMs (2000) must not exceed requestTimeoutMs (1000)');
    // a long headers timeout alone raises the request timeout with it
    expect(() => new HttpServer(handlers, { headersTimeoutMs: 60_000 })).not.toThrow();
  });
});
