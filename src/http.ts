// The `sluice/http` entry point: node:http / Connect / Express middleware, client
// addresses behind trusted proxies, 429/503 responses with RateLimit headers, and a
// fetch wrapper that honours Retry-After. The Fastify plugin is `sluice/fastify`.
export {
  createClientIp,
  normalizeIp,
  type ClientIpOptions,
  type ClientIpResolver,
  type ForwardedHeader,
  type TrustProxy,
} from './http/client-ip.js';
export {
  apiKeyDigest,
  byApiKey,
  byClientIp,
  byPrincipal,
  firstOf,
  type ApiKeyOptions,
  type DescriptorBuilder,
  type DescriptorResult,
  type RequestContext,
} from './http/descriptors.js';
export {
  EdgeLimiter,
  type EdgeEvent,
  type EdgeOptions,
  type EdgeOutcome,
  type EdgeSettleEvent,
  type EdgeStats,
  type EdgeVerdict,
  type RouteLimitOptions,
} from './http/http-limiter.js';
export {
  HttpRateLimit,
  createHttpRateLimit,
  type HttpMiddleware,
  type HttpRateLimitOptions,
  type HttpRouteOptions,
  type SettledResponse,
} from './http/node-middleware.js';
export {
  RATELIMIT_HEADERS_DRAFT,
  ceilSeconds,
  policyItem,
  rateLimitHeaders,
  retryAfterSeconds,
  type RateLimitHeaderOptions,
} from './http/rate-limit-headers.js';
export {
  INTERNAL_ERROR_BODY,
  JSON_CONTENT_TYPE,
  UNAVAILABLE_BODY,
  overLimitBody,
  type EdgeResponse,
} from './http/responses.js';
export {
  createRetryingFetch,
  parseRetryAfter,
  type RetryingFetchOptions,
} from './http/retry-client.js';
