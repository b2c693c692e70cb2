// The payments API of docs/http.md: Express 5, one rate limit per tenant
// (100 units/s, burst 20), a transfer costs 5 units and a status lookup 1.
import express, { type Express, type NextFunction, type Request, type Response } from 'express';
import { createLimiter, type Clock, type PolicyInput, type Store } from 'sluice';
import { byPrincipal, createHttpRateLimit, type HttpRateLimit } from 'sluice/http';

/** The policy: one token bucket per tenant; costs are keyed on the route templates. */
export const paymentsPolicies: PolicyInput[] = [
  {
    name: 'payments-tenant',
    match: ['tenant'],
    rate: 100,
    period: '1s',
    burst: 20,
    cost: {
      default: 1,
      rules: [
        { when: { route: 'POST /transfers/:id' }, cost: 5 },
        { when: { route: 'GET /transfers/:id/status' }, cost: 1 },
      ],
    },
    failureMode: 'closed',
    // Longest wait for the store before `closed` answers 503. The default, 10ms, suits a
    // quiet production host; this demo often shares a busy laptop.
    timeout: '250ms',
  },
];

/** Demo API keys; a real service would look them up (and compare in constant time). */
export const demoApiKeys: Readonly<Record<string, string>> = {
  'demo-key-acme': 'acme',
  'demo-key-globex': 'globex',
};

interface TenantRequest extends Request {
  tenant?: string;
}

/** Authentication first: an unknown or missing key is a 401 and never reaches the limiter. */
function authenticate(req: TenantRequest, res: Response, next: NextFunction): void {
  const tenant = demoApiKeys[req.get('x-api-key') ?? ''];
  if (tenant === undefined) {
    res.status(401).json({ error: 'unknown api key' });
    return;
  }
  req.tenant = tenant;
  next();
}

export interface PaymentsApp {
  readonly app: Express;
  readonly limits: HttpRateLimit;
}

export function createPaymentsApp(options: { store: Store; clock?: Clock }): PaymentsApp {
  const limiter = createLimiter({
    store: options.store,
    policies: paymentsPolicies,
    ...(options.clock === undefined ? {} : { clock: options.clock }),
  });
  const limits = createHttpRateLimit({
    limiter,
    // The tenant authenticate() found: trusted request data, never a raw header value.
    descriptor: byPrincipal((req) => (req as TenantRequest).tenant, 'tenant'),
    headers: { legacy: false },
  });

  const app = express();
  // Each route gets its own rate limit middleware, after authentication: the label is
  // the route template ("POST /transfers/:id"), so every transfer id shares one bucket.
  app.post('/transfers/:id', authenticate, limits.route(), (req, res) => {
    res.status(202).json({ transfer: req.params['id'], state: 'accepted' });
  });
  app.get('/transfers/:id/status', authenticate, limits.route(), (req, res) => {
    res.json({ transfer: req.params['id'], state: 'settled' });
  });
  return { app, limits };
}
