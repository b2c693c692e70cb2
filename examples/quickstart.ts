import { createLimiter, MemoryStore } from 'sluice';

const limiter = createLimiter({
  store: new MemoryStore(),
  policies: [
    {
      name: 'payments-tenant', // the stable name clients see
      match: ['tenant'], // one bucket per tenant
      rate: 100, // units per second
      burst: 20,
      cost: { rules: [{ when: { route: 'POST /transfers' }, cost: 5 }] },
      failureMode: 'closed',
    },
  ],
});

const r = await limiter.check({ tenant: 'acme', route: 'POST /transfers' });
console.log(r.allowed, r.decision?.remaining, r.retryAfterMs); // true 15 0
