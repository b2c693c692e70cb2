// The `sluice/fastify` entry point. It imports only types from 'fastify', so loading it
// never loads Fastify; the descriptor helpers are in `sluice/http`.
export {
  createFastifyRateLimit,
  type FastifyRateLimit,
  type FastifyRateLimitOptions,
  type SluiceRouteConfig,
} from './http/fastify-plugin.js';
