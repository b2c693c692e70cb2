/**
 * Free-port selection for test servers on loopback.
 *
 * There is an unavoidable race: the port is free when we close our probe socket, and another
 * process may take it before redis-server binds. {@link RedisServer.start} therefore treats
 * "Address already in use" as "pick another port and try again".
 */
import net from 'node:net';

/**
 * Returns a TCP port on 127.0.0.1 that was free a moment ago: listens on port 0, reads the port
 * the kernel chose, and closes the listener before resolving.
 *
 * Ports come from the kernel's ephemeral range (often 32768–60999), so `port + 10000` may not
 * be a valid port: ask for a second port for a cluster bus instead of adding 10000.
 */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.unref();
    server.once('error', reject);
    server.listen({ host: '127.0.0.1', port: 0, exclusive: true }, () => {
      const address = server.address();
      if (address === null || typeof address === 'string') {
        server.close();
        reject(new Error(`unexpected listener address ${String(address)}`));
        return;
      }
      const { port } = address;
      server.close((error) => (error ? reject(error) : resolve(port)));
    });
  });
}
