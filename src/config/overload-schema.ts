import { z } from 'zod';
import { durationMs } from '../algorithms/params.js';
import { PolicyError, formatIssue, type PolicyIssue } from '../core/errors.js';
import type { ErrorCode } from '../core/error-codes.js';
import { CRITICALITIES } from '../core/criticality.js';
import { DEFAULT_SHARES, sharesProblem, type CriticalityShares } from './criticality-shares.js';
import { issueText } from './issue-text.js';

const whole = (min: number) => z.number().int('must be a whole number').min(min);
const ratio = z.number().gt(0, 'must be above 0').max(1);
const backoffRatio = z.number().min(0.5).lt(1, 'must be below 1');

function orderedBounds(
  l: { initial: number; min: number; max: number },
  ctx: z.RefinementCtx,
): void {
  if (l.min > l.max)
    ctx.addIssue({ code: 'custom', path: ['min'], message: `min ${l.min} exceeds max ${l.max}` });
  else if (l.initial < l.min || l.initial > l.max) {
    ctx.addIssue({
      code: 'custom',
      path: ['initial'],
      message: `initial ${l.initial} must be between min ${l.min} and max ${l.max}`,
    });
  }
}

const limitForms = z.discriminatedUnion('algorithm', [
  z.object({ algorithm: z.literal('fixed'), limit: whole(1) }).strict(),
  z
    .object({
      algorithm: z.literal('aimd'),
      initial: whole(1).default(20),
      min: whole(1).default(1),
      max: whole(1).default(200),
      backoffRatio: backoffRatio.default(0.9),
      timeout: durationMs.default(5_000),
    })
    .strict()
    .superRefine(orderedBounds),
  z
    .object({
      algorithm: z.literal('gradient'),
      initial: whole(1).default(20),
      min: whole(1).default(2),
      max: whole(1).default(200),
      tolerance: z.number().min(1).default(1.5),
      smoothing: ratio.default(1),
      minRttPeriod: durationMs.default(10_000),
      backoffRatio: backoffRatio.default(0.9),
    })
    .strict()
    .superRefine(orderedBounds),
]);

const ALGORITHMS = ['fixed', 'aimd', 'gradient'] as const;

/**
 * The limit: the algorithm is checked first, so a wrong one is named as such, and the
 * fields of a right one report their own issues (a plain union would say "matches none").
 */
const limitSchema = z.unknown().transform((v, ctx): z.output<typeof limitForms> => {
  const algorithm = (v as { algorithm?: unknown } | null)?.algorithm;
  if (typeof v !== 'object' || v === null || Array.isArray(v)) {
    ctx.addIssue({ code: 'custom', message: 'expected a mapping with an "algorithm"', input: v });
    return z.NEVER;
  }
  if (!(ALGORITHMS as readonly unknown[]).includes(algorithm)) {
    ctx.addIssue({
      code: 'custom',
      path: ['algorithm'],
      message: `must be one of ${ALGORITHMS.map((a) => `"${a}"`).join(', ')}, got ${JSON.stringify(algorithm) ?? 'nothing'}`,
      input: v,
    });
    return z.NEVER;
  }
  const r = limitForms.safeParse(v, { error: issueText });
  if (r.success) return r.data;
  for (const i of r.error.issues) {
    ctx.addIssue({ code: 'custom', path: i.path as PropertyKey[], message: i.message, input: v });
  }
  return z.NEVER;
}) as unknown as z.ZodType<z.output<typeof limitForms>, z.input<typeof limitForms>>;

const sharesSchema = z
  .object(Object.fromEntries(CRITICALITIES.map((c) => [c, ratio.optional()])))
  .strict()
  .transform((s, ctx): CriticalityShares => {
    const merged = {
      ...DEFAULT_SHARES,
      ...Object.fromEntries(Object.entries(s).filter(([, v]) => v !== undefined)),
    } as CriticalityShares;
    const problem = sharesProblem(merged);
    if (problem !== undefined) {
      ctx.addIssue({ code: 'custom', message: problem });
      return z.NEVER;
    }
    return merged;
  });

const queueSchema = z
  .object({
    size: whole(1).default(100),
    maxWait: durationMs.default(1_000),
    order: z.enum(['fifo', 'lifo']).default('lifo'),
  })
  .strict();

const breakerSchema = z
  .object({
    window: durationMs.default(10_000),
    buckets: whole(1).max(1000).default(10),
    minimumCalls: whole(1).default(20),
    errorRatio: ratio.optional(),
    slowCallRatio: ratio.optional(),
    slowCall: durationMs.optional(),
    errorCount: whole(1).optional(),
    open: durationMs.default(5_000),
    probes: whole(1).default(3),
    probeLease: durationMs.default(10_000),
  })
  .strict()
  .superRefine((b, ctx) => {
    if (b.slowCallRatio !== undefined && b.slowCall === undefined) {
      ctx.addIssue({
        code: 'custom',
        path: ['slowCall'],
        message: 'slowCallRatio needs slowCall (the duration that counts as slow)',
      });
    }
  });

/**
 * A section that is `false` (off), absent (`fallback`) or a mapping checked by `schema`,
 * reporting the mapping's own issues (a plain union would only say "matches none").
 */
function sectionOrFalse<S extends z.ZodType>(
  schema: S,
  fallback: z.output<S> | false,
): z.ZodDefault<z.ZodType<z.output<S> | false, z.input<S> | false>> {
  const section = z
    .unknown()
    .optional()
    .transform((v, ctx): z.output<S> | false => {
      if (v === false) return false;
      if (v === undefined) return fallback;
      const r = schema.safeParse(v, { error: issueText });
      if (r.success) return r.data;
      for (const i of r.error.issues) {
        ctx.addIssue({
          code: 'custom',
          path: i.path as PropertyKey[],
          message: i.message,
          input: v,
        });
      }
      return z.NEVER;
    });
  // Typed as a defaulted field (optional in, never undefined out), which it behaves as.
  return section as unknown as z.ZodDefault<z.ZodType<z.output<S> | false, z.input<S> | false>>;
}

/**
 * The `overload` section of a policy file, and the data part of the boundary's options
 * in code. Durations are ms or strings such as `"200ms"`; see docs/overload.md.
 */
export const overloadSchema = z
  .object({
    limit: limitSchema.default({
      algorithm: 'gradient',
      initial: 20,
      min: 2,
      max: 200,
      tolerance: 1.5,
      smoothing: 1,
      minRttPeriod: 10_000,
      backoffRatio: 0.9,
    }),
    shares: sharesSchema.default(DEFAULT_SHARES),
    queue: sectionOrFalse(queueSchema, { size: 100, maxWait: 1_000, order: 'lifo' }),
    breaker: sectionOrFalse(breakerSchema, false),
    retryAfter: durationMs.default(1_000),
  })
  .strict();

/** What users write: the policy file's `overload` section, or the boundary's options. */
export type OverloadInput = z.input<typeof overloadSchema>;

/** Validated overload settings (durations in ms). */
export type OverloadConfig = z.output<typeof overloadSchema>;

function pathOf(path: readonly PropertyKey[]): string {
  let out = '';
  for (const p of path)
    out += typeof p === 'number' ? `[${p}]` : out === '' ? String(p) : `.${String(p)}`;
  return out;
}

/**
 * The issues of an `overload` section, each with its path under `prefix` (and the file,
 * when given); empty when valid.
 */
export function overloadIssues(
  input: unknown,
  prefix: readonly PropertyKey[],
  file?: string,
): { config?: OverloadConfig; issues: PolicyIssue[] } {
  const r = overloadSchema.safeParse(input, { error: issueText });
  if (r.success) return { config: r.data, issues: [] };
  return {
    issues: r.error.issues.map((i) => {
      const issue = { path: pathOf([...prefix, ...i.path]), message: i.message };
      return file === undefined ? issue : { ...issue, file };
    }),
  };
}

/**
 * Validates overload settings given in code. Throws a `PolicyError` with `code` (by
 * default `SLUICE_ERR_OVERLOAD_CONFIG_INVALID`) listing every issue.
 */
export function parseOverloadConfig(
  input: unknown,
  code: ErrorCode = 'SLUICE_ERR_OVERLOAD_CONFIG_INVALID',
): OverloadConfig {
  const { config, issues } = overloadIssues(input, []);
  if (config !== undefined) return config;
  throw new PolicyError(
    code,
    `invalid overload options (${issues.length} issue${issues.length === 1 ? '' : 's'}):\n` +
      issues.map((i) => `  ${formatIssue(i)}`).join('\n'),
    { issues },
  );
}
