import { algorithmOf } from '../../../src/algorithms/index.js';
import type { Decision } from '../../../src/core/decision.js';
import { StoreError } from '../../../src/core/errors.js';
import type { Policy } from '../../../src/core/policy.js';
import type { Stage, StageContext, StageItem, StageVerdict } from '../../../src/limiter/stage.js';
import { StoreGateway } from '../../../src/limiter/store-gateway.js';
import type { Store, StoreResult } from '../../../src/stores/store.js';

const gateways = new WeakMap<Store, StoreGateway>();

/** One gateway per store, as one limiter has: what a limiter gives its stages. */
export function gatewayOf(store: Store): StoreGateway {
  let g = gateways.get(store);
  if (g === undefined) gateways.set(store, (g = new StoreGateway(store, undefined, undefined)));
  return g;
}

/**
 * One check of one policy item through `stages` and then `store`, as the stage seam
 * (src/limiter/stage.ts) defines it: each stage may answer, pass on, or pass on with
 * another cost; an unanswered item goes to the store; the failure mode decides when the
 * store fails; every stage that entered is told the outcome. For the stage tests, the
 * accuracy children and the bench until the limiter's pipeline runs stages itself.
 */
export async function stageCheck(
  stages: readonly Stage[],
  store: Store,
  policy: Policy,
  key: string,
  cost: number,
  ctx: StageContext,
): Promise<Decision> {
  // A stage's own store calls go through a store gateway, as the limiter gives them one.
  if (ctx.gateway === undefined) ctx = { ...ctx, gateway: gatewayOf(store) };
  const entered: [Stage, StageItem, StageVerdict][] = [];
  let item: StageItem = {
    policy,
    key,
    capacity: algorithmOf(policy.algorithm).capacity(policy.params),
    cost,
  };
  let decision: Decision | undefined;
  let error: StoreError | undefined;
  for (const stage of stages) {
    if (!stage.appliesTo(policy)) continue;
    const got = stage.enter(item, ctx);
    const verdict = got instanceof Promise ? await got : got;
    entered.push([stage, item, verdict]);
    if (verdict?.kind === 'answer') {
      decision = { ...verdict.decision, policy: policy.name, path: verdict.path };
      break;
    }
    if (verdict?.kind === 'pass') item = { ...item, cost: verdict.cost };
  }
  if (decision === undefined) {
    // The store is given the policy's timeout, as the limiter gives it.
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<readonly StoreResult[]>((resolve) => {
      timer = setTimeout(
        () =>
          resolve([
            {
              ok: false,
              error: new StoreError('SLUICE_ERR_STORE_TIMEOUT', 'no answer within the timeout'),
            },
          ]),
        policy.timeoutMs,
      );
    });
    const [result] = await Promise.race([
      store.apply(
        [
          {
            key,
            algorithm: algorithmOf(policy.algorithm),
            params: policy.params,
            cost: item.cost,
            enforce: true,
          },
        ],
        { nowMs: ctx.nowMs },
      ),
      timedOut,
    ]);
    clearTimeout(timer);
    if (result!.ok) decision = { ...result!.decision, policy: policy.name, path: 'store' };
    else {
      error = result!.error;
      const open = policy.failureMode !== 'closed';
      decision = {
        status: open ? 'OK' : 'UNAVAILABLE',
        allowed: open,
        limit: item.capacity,
        remaining: 0,
        retryAfterMs: 0,
        resetAfterMs: 0,
        policy: policy.name,
        path: open ? 'fail-open' : 'fail-closed',
      };
    }
  }
  const outcome = { admitted: decision.allowed, decision, ...(error ? { error } : {}) };
  for (const [stage, it, verdict] of entered) stage.settle?.(it, verdict, outcome, ctx);
  return decision;
}
