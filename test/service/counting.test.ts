/**
 * How a request's descriptors are charged, through the real service (envoy's
 * ShouldRateLimit over gRPC and `POST /json`) on the memory store and on a real
 * redis-server. One table of request shapes, each with envoyproxy/ratelimit's answers and
 * counters (src/redis/fixed_cache_impl.go: an INCRBY per descriptor, then each counter
 * compared with its own limit), run in the default mode and in the opt-in all-or-nothing
 * mode side by side. The clock stands still, so no window rolls over.
 */
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningService } from '../../src/service/main.js';
import { startLoopbackService, stillClock } from '../support/loopback-service.js';
import { RedisServer } from '../support/redis-server.js';
import { readState, STATE_CODE } from '../support/redis-state.js';
import { call, connect, type Clients } from './grpc/client.js';

const fixtures = join(import.meta.dirname, 'fixtures/counting');

/** The rules of fixtures/counting/*.yaml: limit per minute, and shadow mode. */
const RULES = {
  tight: { limit: 2, shadow: false },
  loose: { limit: 10, shadow: false },
  shadowed: { limit: 2, shadow: true },
  credits: { limit: 1, shadow: false },
  bonus: { limit: 2, shadow: false },
  blocked: { limit: 0, shadow: false },
} as const;
type Rule = keyof typeof RULES;

type Code = 'OK' | 'OVER_LIMIT';
/** One descriptor's answer: code and limit_remaining. */
type Answer = readonly [Code, number];
interface Want {
  readonly overall: Code;
  readonly statuses: readonly Answer[];
}
/** upstream: envoyproxy/ratelimit's counting (Sluice's default); aon: all-or-nothing. */
type Counting = 'upstream' | 'aon';

interface Step {
  /** One descriptor per rule named, with its own hits_addend when given. */
  readonly ask: readonly { readonly rule: Rule; readonly hits?: number }[];
  /** The request's hits_addend. */
  readonly hits?: number;
  readonly want: Readonly<Record<Counting, Want>>;
}
interface Row {
  readonly shape: string;
  readonly steps: readonly Step[];
  /** Each rule's counter after the steps (rules not named: untouched). */
  readonly counters: Readonly<Record<Counting, Partial<Record<Rule, number>>>>;
}

const same = (want: Want): Record<Counting, Want> => ({ upstream: want, aon: want });
const OK = (remaining: number): Answer => ['OK', remaining];
const OVER: Answer = ['OVER_LIMIT', 0];

const rows: readonly Row[] = [
  {
    shape: 'two descriptors, one over its limit',
    steps: [
      {
        ask: [{ rule: 'tight', hits: 2 }, { rule: 'loose' }],
        want: same({ overall: 'OK', statuses: [OK(0), OK(9)] }),
      },
      {
        ask: [{ rule: 'tight' }, { rule: 'loose' }],
        want: {
          // upstream increments loose although tight denies the request
          upstream: { overall: 'OVER_LIMIT', statuses: [OVER, OK(8)] },
          // nothing is charged: loose reports what it still has
          aon: { overall: 'OVER_LIMIT', statuses: [OVER, OK(9)] },
        },
      },
    ],
    counters: { upstream: { tight: 3, loose: 2 }, aon: { tight: 2, loose: 1 } },
  },
  {
    shape: 'the same descriptor twice',
    steps: [
      {
        ask: [
          { rule: 'loose', hits: 6 },
          { rule: 'loose', hits: 6 },
        ],
        want: {
          // two INCRBYs on one key: the second sees the first (6, then 12 > 10)
          upstream: { overall: 'OVER_LIMIT', statuses: [OK(4), OVER] },
          aon: { overall: 'OVER_LIMIT', statuses: [OK(10), OVER] },
        },
      },
      {
        ask: [{ rule: 'loose', hits: 4 }],
        // upstream's counter is past the limit until the window ends
        want: {
          upstream: { overall: 'OVER_LIMIT', statuses: [OVER] },
          aon: { overall: 'OK', statuses: [OK(6)] },
        },
      },
    ],
    counters: { upstream: { loose: 16 }, aon: { loose: 4 } },
  },
  {
    shape: 'a descriptor hits_addend above the limit',
    steps: [
      // OVER_LIMIT, never an error (an error is an allow under envoy's failure_mode_deny=false)
      {
        ask: [{ rule: 'loose', hits: 15 }],
        want: same({ overall: 'OVER_LIMIT', statuses: [OVER] }),
      },
      {
        ask: [{ rule: 'loose' }],
        want: {
          upstream: { overall: 'OVER_LIMIT', statuses: [OVER] },
          aon: { overall: 'OK', statuses: [OK(9)] },
        },
      },
    ],
    counters: { upstream: { loose: 16 }, aon: { loose: 1 } },
  },
  {
    shape: 'a request hits_addend above one of two limits',
    steps: [
      {
        ask: [{ rule: 'tight' }, { rule: 'loose' }],
        hits: 3,
        want: {
          upstream: { overall: 'OVER_LIMIT', statuses: [OVER, OK(7)] },
          aon: { overall: 'OVER_LIMIT', statuses: [OVER, OK(10)] },
        },
      },
    ],
    counters: { upstream: { tight: 3, loose: 3 }, aon: { tight: 0, loose: 0 } },
  },
  {
    shape: 'a shadow_mode rule',
    steps: [
      // over its limit, it answers OK (with 0 left)
      { ask: [{ rule: 'shadowed', hits: 3 }], want: same({ overall: 'OK', statuses: [OK(0)] }) },
      {
        ask: [{ rule: 'tight', hits: 3 }, { rule: 'shadowed' }],
        want: {
          upstream: { overall: 'OVER_LIMIT', statuses: [OVER, OK(0)] },
          aon: { overall: 'OVER_LIMIT', statuses: [OVER, OK(2)] },
        },
      },
    ],
    counters: { upstream: { tight: 3, shadowed: 4 }, aon: { tight: 0, shadowed: 0 } },
  },
  {
    shape: 'quota_mode descriptors',
    steps: [
      {
        ask: [{ rule: 'credits' }, { rule: 'bonus' }],
        want: same({ overall: 'OK', statuses: [OK(0), OK(1)] }),
      },
      // credits is over, bonus is not: the request passes
      {
        ask: [{ rule: 'credits' }, { rule: 'bonus' }],
        want: same({ overall: 'OK', statuses: [OVER, OK(0)] }),
      },
      {
        ask: [{ rule: 'credits' }, { rule: 'bonus' }],
        want: same({ overall: 'OVER_LIMIT', statuses: [OVER, OVER] }),
      },
    ],
    counters: { upstream: { credits: 3, bonus: 3 }, aon: { credits: 1, bonus: 2 } },
  },
  {
    shape: 'requests_per_unit 0 beside another rule',
    steps: [
      {
        ask: [{ rule: 'blocked' }, { rule: 'loose' }],
        want: {
          upstream: { overall: 'OVER_LIMIT', statuses: [OVER, OK(9)] },
          aon: { overall: 'OVER_LIMIT', statuses: [OVER, OK(10)] },
        },
      },
    ],
    counters: { upstream: { loose: 1 }, aon: { loose: 0 } },
  },
];

/** Where a mode comes from: the service default, and the domain's `sluice.decision`. */
const modes = [
  { how: 'the default', service: 'default', domain: 'counting', counting: 'upstream' },
  {
    how: 'sluice.decision: all-or-nothing on the domain',
    service: 'default',
    domain: 'counting-aon',
    counting: 'aon',
  },
  {
    how: 'decisionMode all-or-nothing on the service',
    service: 'aon',
    domain: 'counting',
    counting: 'aon',
  },
  {
    how: 'sluice.decision: per-descriptor on the domain of an all-or-nothing service',
    service: 'aon',
    domain: 'counting-upstream',
    counting: 'upstream',
  },
] as const;

const setups = [
  { store: 'memory', redis: false },
  { store: 'redis', redis: true },
] as const;

describe.each(setups)('counting on the $store store', ({ redis }) => {
  let server: RedisServer | undefined;
  const services: Partial<Record<'default' | 'aon', { svc: RunningService; clients: Clients }>> =
    {};

  beforeAll(async () => {
    if (redis) server = await RedisServer.start();
    for (const which of ['default', 'aon'] as const) {
      const svc = await startLoopbackService({
        envoyConfig: fixtures,
        ...(server === undefined
          ? {}
          : { redis: { type: 'single' as const, url: server.url }, keyPrefix: `sl-${which}` }),
        ...(which === 'aon' ? { decisionMode: 'all-or-nothing' as const } : {}),
        storeTimeoutMs: 5_000, // exactness, not latency, is under test here
        clock: stillClock(),
      });
      services[which] = { svc, clients: connect(svc.grpcPort) };
    }
  }, 30_000);
  afterAll(async () => {
    for (const s of Object.values(services)) {
      s.clients.close();
      await s.svc.shutdown();
    }
    await server?.stop();
  });

  interface Descriptor {
    readonly rule: Rule;
    readonly value: string;
    readonly hits?: number;
  }

  /** One ShouldRateLimit call over `transport`: the overall code and each [code, remaining]. */
  async function ask(
    service: 'default' | 'aon',
    transport: 'gRPC' | '/json',
    domain: string,
    descriptors: readonly Descriptor[],
    hits?: number,
  ): Promise<Want> {
    const { svc, clients } = services[service]!;
    const grpc = transport === 'gRPC';
    const request = {
      domain,
      descriptors: descriptors.map((d) => ({
        entries: [{ key: d.rule, value: d.value }],
        // a wrapped uint64 on the wire (set, even to 0, means "use this"); bare in JSON
        ...(d.hits === undefined ? {} : { hitsAddend: grpc ? { value: d.hits } : d.hits }),
      })),
      ...(hits === undefined ? {} : { hitsAddend: hits }),
    };
    type Status = { code: string; limitRemaining?: number };
    let body: { overallCode: string; statuses: Status[] };
    if (grpc) {
      body = await call(clients.rls, 'ShouldRateLimit', request);
    } else {
      const res = await fetch(`http://127.0.0.1:${svc.httpPort}/json`, {
        method: 'POST',
        body: JSON.stringify(request),
      });
      body = (await res.json()) as typeof body;
      expect(res.status, JSON.stringify(body)).toBe(body.overallCode === 'OVER_LIMIT' ? 429 : 200);
    }
    return {
      overall: body.overallCode as Code,
      statuses: body.statuses.map((s): Answer => [s.code as Code, s.limitRemaining ?? 0]),
    };
  }

  /** The count Redis holds for a descriptor's bucket (its hash tag is the value). */
  async function redisCount(service: 'default' | 'aon', value: string): Promise<number> {
    const client = server!.client();
    const keys = await client.keys(`sl-${service}:{${value}}:*`);
    expect(keys, `one bucket for ${value}`).toHaveLength(1);
    const state = await readState(client, keys[0]!, STATE_CODE['fixed-window']);
    return state![1]!;
  }

  it('names a rule by its sluice.name, else rate_limit.name, in metrics; clients get rate_limit.name', async () => {
    const { svc, clients } = services.default!;
    const request = {
      domain: 'counting',
      descriptors: [
        { entries: [{ key: 'loose', value: 'names' }] },
        { entries: [{ key: 'tight', value: 'names' }], hitsAddend: { value: 3 } },
      ],
    };
    const r = await call<{ statuses: { currentLimit: { name: string } }[] }>(
      clients.rls,
      'ShouldRateLimit',
      request,
    );
    // upstream's field: rate_limit.name, whatever sluice.name says
    expect(r.statuses.map((s) => s.currentLimit.name)).toEqual(['loose', 'tight']);
    const text = await (await fetch(`http://127.0.0.1:${svc.httpPort}/metrics`)).text();
    expect(text).toContain(
      'sluice_decisions_total{policy="loose-public",status="OK",path="store"}',
    );
    expect(text).toContain(
      'sluice_decisions_total{policy="tight",status="OVER_LIMIT",path="store"}',
    );
    // never the internal name of a rule's policy (its storage name)
    expect(text).not.toMatch(/envoy\.[0-9a-f]{24}/);
  });

  describe.each(modes)('decided as $counting by $how', (mode) => {
    describe.each(['gRPC', '/json'] as const)('over %s', (transport) => {
      it.each(rows)('$shape', async (row) => {
        const value = (rule: Rule) =>
          `${row.shape.replace(/\W+/g, '-')}-${mode.domain}-${transport === 'gRPC' ? 'g' : 'j'}-${rule}`;
        for (const [i, step] of row.steps.entries()) {
          const got = await ask(
            mode.service,
            transport,
            mode.domain,
            step.ask.map((a) => ({ ...a, value: value(a.rule) })),
            step.hits,
          );
          expect(got, `step ${i + 1}`).toEqual(step.want[mode.counting]);
        }
        for (const [rule, counter] of Object.entries(row.counters[mode.counting]) as [
          Rule,
          number,
        ][]) {
          // A check that adds nothing (hits_addend 0) answers from the counter alone.
          const { limit, shadow } = RULES[rule];
          const probe = await ask(mode.service, transport, mode.domain, [
            { rule, value: value(rule), hits: 0 },
          ]);
          expect(probe.statuses, `${rule} probed at counter ${counter}`).toEqual([
            [counter > limit && !shadow ? 'OVER_LIMIT' : 'OK', Math.max(0, limit - counter)],
          ]);
          if (server !== undefined && counter > 0) {
            expect(await redisCount(mode.service, value(rule)), `${rule} counter`).toBe(counter);
          }
        }
      });
    });
  });
});
