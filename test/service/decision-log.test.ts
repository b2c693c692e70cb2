import { describe, expect, it } from 'vitest';
import { DecisionLog } from '../../src/service/decision-log.js';
import type { DecisionEvent } from '../../src/service/decision-event.js';
import { identityHash } from '../../src/stores/identity-hash.js';
import { captureLog } from '../support/captured-log.js';

const event: DecisionEvent = {
  decision: {
    policy: 'payments-tenant',
    status: 'OVER_LIMIT',
    allowed: false,
    path: 'store',
    limit: 20,
    remaining: 0,
    retryAfterMs: 250,
    resetAfterMs: 1000,
  },
  identityTag: 'acme',
  requestId: 'r-1',
};

describe('DecisionLog', () => {
  it('logs a decision when the draw falls below the sample rate, with the identity hashed', () => {
    const log = captureLog('info');
    // Draws 0.05, 0.25, 0.1, 0.2 against a rate of 0.2: the 1st and 3rd are logged.
    const draws = [0.05, 0.25, 0.1, 0.2];
    const decisions = new DecisionLog({
      log: log.logger,
      sampleRate: 0.2,
      random: () => draws.shift()!,
    });
    for (let i = 0; i < 4; i++) decisions.record(event);
    expect(log.matching('decision')).toHaveLength(2);
    expect(log.matching('decision')[0]).toMatchObject({
      policy: 'payments-tenant',
      status: 'OVER_LIMIT',
      allowed: false,
      path: 'store',
      remaining: 0,
      retryAfterMs: 250,
      identity: identityHash('acme'),
      requestId: 'r-1',
    });
    expect(JSON.stringify(log.lines)).not.toContain('"acme"');
  });

  it('rate 0 logs nothing and never draws; rate 1 logs everything', () => {
    const log = captureLog('info');
    new DecisionLog({
      log: log.logger,
      sampleRate: 0,
      random: () => {
        throw new Error('drawn');
      },
    }).record(event);
    expect(log.lines).toHaveLength(0);
    new DecisionLog({ log: log.logger, sampleRate: 1, random: () => 0.999 }).record(event);
    expect(log.lines).toHaveLength(1);
    expect(() => new DecisionLog({ log: log.logger, sampleRate: 1.5 })).toThrow(
      'sampleRate must be a number from 0 to 1, got 1.5',
    );
  });
});
