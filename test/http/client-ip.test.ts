import type { IncomingMessage } from 'node:http';
import { describe, expect, it } from 'vitest';
import { createClientIp, normalizeIp, type ClientIpOptions } from '../../src/http/client-ip.js';

/** Only the two things the resolver reads: the socket peer and the headers. */
function req(remoteAddress: string | undefined, headers: Record<string, string> = {}) {
  return { socket: { remoteAddress }, headers } as unknown as IncomingMessage;
}

function ip(options: ClientIpOptions, peer: string, headers: Record<string, string> = {}) {
  return createClientIp(options)(req(peer, headers));
}

describe('createClientIp', () => {
  it('uses the socket address by default and ignores forwarded headers', () => {
    const h = { 'x-forwarded-for': '203.0.113.9', forwarded: 'for=198.51.100.1' };
    expect(ip({}, '192.0.2.10', h)).toBe('192.0.2.10');
    expect(ip({ trustProxy: false }, '::ffff:192.0.2.10', h)).toBe('192.0.2.10');
    expect(ip({}, '2001:DB8::1')).toBe('2001:db8::1');
  });

  it('counts hops from the socket: hop 1 is the peer, hop 2 the rightmost entry', () => {
    const h = { 'x-forwarded-for': '6.6.6.6, 203.0.113.9, 10.0.0.2' };
    // rows: [trusted hops, client]
    const rows: [number, string][] = [
      [1, '10.0.0.2'], // the peer (one proxy) appended 10.0.0.2
      [2, '203.0.113.9'],
      [3, '6.6.6.6'],
      [4, '6.6.6.6'], // chain shorter than the hops: the farthest address
    ];
    for (const [hops, client] of rows) expect(ip({ trustProxy: hops }, '10.0.0.1', h)).toBe(client);
    expect(ip({ trustProxy: 1 }, '10.0.0.1')).toBe('10.0.0.1'); // no header: the peer
  });

  it('with CIDRs, returns the first untrusted address walking back from the socket', () => {
    const trustProxy = ['10.0.0.0/8', '::1', '2001:db8:ffff::/48'];
    const h = { 'x-forwarded-for': '6.6.6.6, 203.0.113.9, 10.9.9.9' };
    expect(ip({ trustProxy }, '10.0.0.1', h)).toBe('203.0.113.9');
    expect(ip({ trustProxy }, '::1', h)).toBe('203.0.113.9');
    expect(ip({ trustProxy }, '::ffff:10.0.0.1', h)).toBe('203.0.113.9');
    // an untrusted peer's headers are never read
    expect(ip({ trustProxy }, '198.51.100.5', h)).toBe('198.51.100.5');
    // every hop trusted: the farthest
    expect(ip({ trustProxy }, '10.0.0.1', { 'x-forwarded-for': '10.1.1.1' })).toBe('10.1.1.1');
  });

  it('strips ports and brackets, and stops at an entry that is not an address', () => {
    const one = { trustProxy: 1 } as const;
    expect(ip(one, '10.0.0.1', { 'x-forwarded-for': '203.0.113.9:5123' })).toBe('203.0.113.9');
    expect(ip(one, '10.0.0.1', { 'x-forwarded-for': '[2001:db8::7]:443' })).toBe('2001:db8::7');
    expect(ip(one, '10.0.0.1', { 'x-forwarded-for': '2001:db8::7' })).toBe('2001:db8::7');
    // garbage where the client should be: the proxy that wrote it, never the garbage
    for (const bad of ['unknown', 'evil.example', '1.2.3.4.5', '', '[::1', '1.2.3.4:x']) {
      expect(ip(one, '10.0.0.1', { 'x-forwarded-for': bad })).toBe('10.0.0.1');
    }
  });

  it('reads RFC 7239 Forwarded when told to, with quoting and parameters', () => {
    const options = { trustProxy: 1, header: 'forwarded' } as const;
    const forwarded =
      'for=6.6.6.6;proto=http, for="[2001:DB8:cafe::17]:4711";by=10.0.0.1, For=10.0.0.2;host="a,b"';
    expect(ip(options, '10.0.0.3', { forwarded })).toBe('10.0.0.2');
    expect(ip({ ...options, trustProxy: 2 }, '10.0.0.3', { forwarded })).toBe('2001:db8:cafe::17');
    expect(ip({ ...options, trustProxy: 3 }, '10.0.0.3', { forwarded })).toBe('6.6.6.6');
    expect(ip(options, '10.0.0.3', { forwarded: 'for=_hidden' })).toBe('10.0.0.3');
    // the other header is not read
    expect(ip(options, '10.0.0.3', { 'x-forwarded-for': '6.6.6.6' })).toBe('10.0.0.3');
  });

  it('refuses invalid settings with SLUICE_ERR_HTTP_CONFIG_INVALID', () => {
    const bad: unknown[] = [
      0,
      -1,
      1.5,
      ['10.0.0.0/33'],
      ['not-an-ip'],
      ['::/129'],
      ['10.0.0.0/x'],
      'yes',
    ];
    for (const trustProxy of bad) {
      expect(() => createClientIp({ trustProxy } as ClientIpOptions)).toThrow(
        expect.objectContaining({ code: 'SLUICE_ERR_HTTP_CONFIG_INVALID' }),
      );
    }
  });

  it('normalizes addresses', () => {
    expect(
      ['::FFFF:1.2.3.4', 'fe80::1%eth0', ' 1.2.3.4 ', 'x', '::ffff:abcd'].map(normalizeIp),
    ).toEqual(['1.2.3.4', 'fe80::1', '1.2.3.4', undefined, '::ffff:abcd']);
  });
});
