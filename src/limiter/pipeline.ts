import type { Decision } from '../core/decision.js';
import type { PreparedItem } from './policy-plan.js';
import type { Stage, StageContext, StageOutcome, StageVerdict } from './stage.js';

/**
 * Running a check's items through their stages (see stage.ts): `enter` in stage order
 * per item until one answers, then, once the check is decided, `settle` for every stage
 * an item entered. The limiter calls these only for checks with a policy some stage
 * applies to.
 */

/** Throws a `TypeError` naming what is wrong when `stages` is not a list of stages. */
export function checkStages(stages: unknown): asserts stages is readonly Stage[] {
  if (!Array.isArray(stages)) {
    throw new TypeError(`Limiter: stages must be an array of stages, got ${typeof stages}`);
  }
  stages.forEach((stage: unknown, i) => {
    const s = stage as Partial<Stage> | null;
    if (
      typeof s !== 'object' ||
      s === null ||
      typeof s.name !== 'string' ||
      typeof s.appliesTo !== 'function' ||
      typeof s.enter !== 'function'
    ) {
      throw new TypeError(
        `Limiter: stages[${i}] is not a stage (it needs a name, appliesTo() and enter())`,
      );
    }
  });
}

function isPromise(v: unknown): v is Promise<StageVerdict> {
  return typeof (v as { then?: unknown } | undefined)?.then === 'function';
}

/**
 * Notes `stage`'s verdict on `item`; a `TypeError` naming the stage when it is not a
 * verdict (the stage still counts as entered, with no verdict, so it is settled).
 */
function take(item: PreparedItem, stage: Stage, v: StageVerdict): void {
  if (
    v === undefined ||
    (v.kind === 'pass' && Number.isSafeInteger(v.cost) && v.cost >= 0) ||
    (v.kind === 'answer' && typeof v.decision === 'object' && v.decision !== null)
  ) {
    item.take(v);
    return;
  }
  item.take(undefined);
  throw new TypeError(
    v.kind === 'pass'
      ? `stage "${stage.name}" passed on cost ${String(v.cost)}; a cost is a non-negative safe integer`
      : `stage "${stage.name}" returned something that is not a verdict`,
  );
}

/**
 * Enters every item into its stages, in order, from where it stopped, until a stage
 * answers it or none is left. `undefined` when that is done; a promise when a stage
 * answered with one (the keys are then fixed first: the caller's descriptor may change
 * while the check waits). With `sync` (checkSync), a stage's promise is a `TypeError`
 * naming the stage; the stage counts as entered, with no verdict, so it is settled.
 */
export function enterStages(
  items: readonly PreparedItem[],
  ctx: StageContext,
  sync: boolean,
): Promise<void> | undefined {
  for (let i = 0; i < items.length; i++) {
    const item = items[i]!;
    const stages = item.plan.stages;
    while (item.answer === undefined && item.entered < stages.length) {
      const stage = stages[item.entered]!;
      const verdict = stage.enter(item, ctx);
      if (isPromise(verdict)) {
        if (sync) {
          item.take(undefined);
          verdict.then(undefined, () => undefined); // nobody waits for it
          throw new TypeError(
            `Limiter.checkSync: stage "${stage.name}" answered with a promise (it needs remote work); use check()`,
          );
        }
        for (let j = 0; j < items.length; j++) items[j]!.fix();
        return verdict.then((v) => {
          take(item, stage, v);
          return enterStages(items, ctx, false);
        });
      }
      take(item, stage, verdict);
    }
  }
  return undefined;
}

/**
 * Tells every stage each item entered how the check ended for it, item by item, in stage
 * order: `decisions[i]` is the final decision of `items[i]`; `admitted` whether the check
 * admitted the request, or `undefined` when each item was decided on its own (then each
 * item's own decision says).
 */
export function settleStages(
  items: readonly PreparedItem[],
  ctx: StageContext,
  decisions: readonly Decision[],
  admitted: boolean | undefined,
): void {
  for (let i = 0; i < items.length; i++) {
    const item = items[i]!;
    if (item.entered === 0) continue;
    const stages = item.plan.stages;
    const decision = decisions[i]!;
    const error = item.storeError;
    const o: StageOutcome = {
      admitted: admitted ?? decision.allowed,
      decision,
      ...(error === undefined ? {} : { error }),
    };
    for (let j = 0; j < item.entered; j++) stages[j]!.settle?.(item, item.verdicts![j], o, ctx);
  }
}
