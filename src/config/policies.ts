import { z } from 'zod';
import { ALGORITHMS, ALGORITHM_KINDS, type AlgorithmKind } from '../algorithms/index.js';
import { durationMs } from '../algorithms/params.js';
import type { DescriptorEntry } from '../core/descriptor.js';
import { PolicyError, formatIssue, type PolicyIssue } from '../core/errors.js';
import type { MatchEntry, Policy } from '../core/policy.js';
import { issueText } from './issue-text.js';
import { overloadIssues, type OverloadConfig } from './overload-schema.js';
import {
  batchSchema,
  localSchema,
  stageFieldCode,
  stageSettingsProblems,
} from './stage-settings.js';
import { settleSchema, settleSettings } from './settle-settings.js';

/** A policy name: stable, public, safe inside storage keys and metric labels. */
export const POLICY_NAME = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$/;

const nonEmpty = z.string().min(1, 'must not be empty');
const costValue = z.number().int('must be a whole number').min(0).max(Number.MAX_SAFE_INTEGER);

const matchEntry = z.union([
  nonEmpty.transform((key): MatchEntry => ({ key })),
  z
    .object({ key: nonEmpty, value: z.string().optional() })
    .strict()
    .transform((e): MatchEntry =>
      e.value === undefined ? { key: e.key } : { key: e.key, value: e.value },
    ),
]);

const costRule = z
  .object({ when: z.record(nonEmpty, z.string()), cost: costValue })
  .strict()
  .refine((r) => Object.keys(r.when).length > 0, { message: '"when" needs at least one entry' });

const costField = z.union([
  costValue.transform((c) => ({ default: c, rules: [] as z.infer<typeof costRule>[] })),
  z.object({ default: costValue.default(1), rules: z.array(costRule).default([]) }).strict(),
]);

/** Default store deadline per policy, in ms. */
export const DEFAULT_TIMEOUT_MS = 10;

/** The fields every policy has; the rest belong to its algorithm. */
const baseFields = {
  name: z
    .string()
    .regex(
      POLICY_NAME,
      'must start with a letter or digit and use only letters, digits, "_", "." or "-" (at most 128)',
    ),
  description: z.string().optional(),
  match: z.array(matchEntry).min(1, 'needs at least one entry'),
  identity: z.array(nonEmpty).optional(),
  algorithm: z.enum(ALGORITHM_KINDS as [AlgorithmKind, ...AlgorithmKind[]]).default('token-bucket'),
  cost: costField.default({ default: 1, rules: [] }),
  failureMode: z.enum(['open', 'closed', 'stale']).default('open'),
  stale: z
    .object({
      ttl: durationMs.default(10_000),
      fallback: z.enum(['open', 'closed']).default('closed'),
    })
    .strict()
    .optional(),
  timeout: durationMs.default(DEFAULT_TIMEOUT_MS),
  shadow: z.boolean().default(false),
  local: localSchema.optional(),
  batch: batchSchema.optional(),
  settle: settleSchema.optional(),
};
const BASE_KEYS = new Set(Object.keys(baseFields));
const baseSchema = z.object(baseFields);

const fileSchema = z
  .object({ policies: z.array(z.unknown()), overload: z.unknown().optional() })
  .strict();

/**
 * The user-facing shape of one policy, as written in a policy file or passed to
 * `createLimiter`: the base fields plus the algorithm's own fields, flat. See
 * docs/policies.md for every field and its default.
 */
export type PolicyInput = z.input<typeof baseSchema> & Record<string, unknown>;

/** A validated, frozen list of policies with unique names. */
export interface PolicySet {
  readonly policies: readonly Policy[];
  /** Where the policies came from (a file path), when they came from a file. */
  readonly source?: string;
  /** The file's `overload` section (docs/overload.md), when it has one. */
  readonly overload?: OverloadConfig;
}

function pathOf(prefix: readonly PropertyKey[], path: readonly PropertyKey[]): string {
  let out = '';
  for (const p of [...prefix, ...path]) {
    out += typeof p === 'number' ? `[${p}]` : out === '' ? String(p) : `.${String(p)}`;
  }
  return out;
}

function issuesOf(error: z.ZodError, prefix: readonly PropertyKey[], file?: string): PolicyIssue[] {
  return error.issues.map((i) => {
    const code = i.path[0] === 'settle' ? 'SLUICE_ERR_SETTLE_INVALID' : stageFieldCode(i.path[0]);
    const issue = {
      path: pathOf(prefix, i.path),
      message: i.message,
      ...(code === undefined ? {} : { code }),
    };
    return file === undefined ? issue : { ...issue, file };
  });
}

type BaseFields = z.output<typeof baseSchema>;

/**
 * The base fields that are valid on their own (defaults applied), for the checks that
 * relate fields while another field is wrong.
 */
function validBaseFields(raw: object): Partial<BaseFields> {
  const out: Record<string, unknown> = {};
  for (const [key, schema] of Object.entries(baseFields)) {
    const r = schema.safeParse((raw as Record<string, unknown>)[key]);
    if (r.success) out[key] = r.data;
  }
  return out as Partial<BaseFields>;
}

function parseOne(
  raw: unknown,
  at: readonly PropertyKey[],
  issues: PolicyIssue[],
  file?: string,
): Policy | undefined {
  const add = (path: readonly PropertyKey[], message: string): void => {
    issues.push(
      file === undefined
        ? { path: pathOf(at, path), message }
        : { file, path: pathOf(at, path), message },
    );
  };
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) {
    add([], 'expected a policy object');
    return undefined;
  }
  const before = issues.length;
  const base = baseSchema.safeParse(raw, { error: issueText });
  if (!base.success) issues.push(...issuesOf(base.error, at, file));
  // Every check runs on the fields that are valid, so that a policy's every problem is
  // reported at once: a bad name does not hide a bad rate.
  const valid = base.success ? base.data : validBaseFields(raw);
  const kind = valid.algorithm;
  const rest = Object.fromEntries(Object.entries(raw).filter(([k]) => !BASE_KEYS.has(k)));
  const params =
    kind === undefined
      ? undefined
      : ALGORITHMS[kind].paramsSchema.safeParse(rest, { error: issueText });
  if (params !== undefined && !params.success) {
    for (const i of params.error.issues) {
      const message =
        i.code === 'unrecognized_keys'
          ? `${i.message} (not a policy field, nor a field of algorithm "${kind}")`
          : i.message;
      add(i.path, message);
    }
  }
  let identity: string[] = [];
  if (valid.match !== undefined) {
    const keys = valid.match.map((m) => m.key);
    keys.forEach((k, i) => {
      if (keys.indexOf(k) !== i) add(['match', i], `key "${k}" appears more than once`);
    });
    const free = valid.match.filter((m) => m.value === undefined).map((m) => m.key);
    // Default identity: the first match key without a fixed value (usually the tenant),
    // so one identity's policies share a Redis Cluster slot. None: a global policy.
    identity = valid.identity ?? free.slice(0, 1);
    identity.forEach((k, i) => {
      if (!free.includes(k)) {
        add(['identity', i], `"${k}" must be a match key without a fixed value`);
      }
    });
  }
  if (
    valid.stale !== undefined &&
    valid.failureMode !== undefined &&
    valid.failureMode !== 'stale'
  ) {
    add(['stale'], 'only applies with failureMode: stale');
  }
  if (kind !== undefined && params?.success === true && valid.cost !== undefined) {
    const capacity = ALGORITHMS[kind].capacity(params.data);
    const tooBig = (c: number, path: PropertyKey[]): void => {
      if (c > capacity) {
        add(
          path,
          `cost ${c} exceeds the policy's capacity ${capacity}: it could never be admitted`,
        );
      }
    };
    tooBig(valid.cost.default, ['cost', 'default']);
    valid.cost.rules.forEach((r, i) => tooBig(r.cost, ['cost', 'rules', i, 'cost']));
    const problems = stageSettingsProblems(
      {
        algorithm: kind,
        params: params.data as Readonly<Record<string, unknown>>,
        capacity,
        maxCost: Math.max(valid.cost.default, ...valid.cost.rules.map((r) => r.cost)),
        shadow: valid.shadow ?? false,
      },
      valid.local,
      valid.batch,
    );
    for (const p of problems) {
      const where = pathOf(at, p.path);
      issues.push(
        file === undefined
          ? { path: where, message: p.message, code: p.code }
          : { file, path: where, message: p.message, code: p.code },
      );
    }
  }
  if (!base.success || params?.success !== true || issues.length > before) return undefined;
  const b = base.data;

  const policy: Policy = {
    name: b.name,
    match: b.match.map((m) => Object.freeze(m)),
    identity,
    algorithm: b.algorithm,
    params: params.data as Policy['params'],
    cost: {
      defaultCost: b.cost.default,
      rules: b.cost.rules.map((r) => ({
        when: Object.entries(r.when).map(([key, value]): DescriptorEntry => ({ key, value })),
        cost: r.cost,
      })),
    },
    failureMode: b.failureMode,
    ...(b.failureMode === 'stale'
      ? { stale: { ttlMs: b.stale?.ttl ?? 10_000, fallback: b.stale?.fallback ?? 'closed' } }
      : {}),
    timeoutMs: b.timeout,
    shadow: b.shadow,
    ...(b.description === undefined ? {} : { description: b.description }),
    ...(b.local === undefined ? {} : { local: b.local }),
    ...(b.batch === undefined ? {} : { batch: b.batch }),
    ...(b.settle === undefined ? {} : { settle: settleSettings(b.settle)! }),
  };
  return deepFreeze(policy);
}

function deepFreeze<T>(v: T): T {
  if (typeof v === 'object' && v !== null) {
    for (const x of Object.values(v)) deepFreeze(x);
    Object.freeze(v);
  }
  return v;
}

function fail(issues: readonly PolicyIssue[]): never {
  throw new PolicyError(
    'SLUICE_ERR_CONFIG_INVALID',
    `invalid policies (${issues.length} issue${issues.length === 1 ? '' : 's'}):\n` +
      issues.map((i) => `  ${formatIssue(i)}`).join('\n'),
    { issues },
  );
}

/**
 * Validates policy inputs. Reports every issue at once in a `PolicyError`
 * (`SLUICE_ERR_CONFIG_INVALID`) whose `issues` name the file (when given), the path
 * inside it (`policies[0].burst`) and the problem.
 */
export function parsePolicies(
  inputs: readonly unknown[],
  file?: string,
  prefix: readonly PropertyKey[] = [],
): PolicySet {
  const issues: PolicyIssue[] = [];
  const policies: Policy[] = [];
  inputs.forEach((raw, i) => {
    const p = parseOne(raw, [...prefix, i], issues, file);
    if (p !== undefined) policies.push(p);
  });
  const seen = new Map<string, number>();
  inputs.forEach((raw, i) => {
    const name = (raw as { name?: unknown } | null)?.name;
    if (typeof name !== 'string') return;
    const first = seen.get(name);
    if (first === undefined) seen.set(name, i);
    else {
      const message = `duplicate policy name "${name}" (first at ${pathOf(prefix, [first])})`;
      issues.push(
        file === undefined
          ? { path: pathOf(prefix, [i, 'name']), message }
          : { file, path: pathOf(prefix, [i, 'name']), message },
      );
    }
  });
  if (issues.length > 0) fail(issues);
  return Object.freeze(
    file === undefined
      ? { policies: Object.freeze(policies) }
      : { policies: Object.freeze(policies), source: file },
  );
}

/** What a policy file that holds envoyproxy/ratelimit config is told. */
export const ENVOY_CONFIG_GIVEN =
  'this is envoyproxy/ratelimit config (it has a top-level "domain"), not a Sluice policy file; ' +
  'give it to "sluice serve --config" (or check it with "sluice validate")';

const isRecord = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * Validates a parsed policy document: `{ policies: [...] }`. Every issue is reported:
 * a wrong top level does not hide the problems of the policies under it. A document
 * with a top-level `domain` and no `policies` is envoyproxy/ratelimit config and is
 * refused as such ({@link ENVOY_CONFIG_GIVEN}).
 */
export function parsePolicyDocument(doc: unknown, file?: string): PolicySet {
  if (isRecord(doc) && 'domain' in doc && !('policies' in doc)) {
    fail([
      file === undefined
        ? { path: '', message: ENVOY_CONFIG_GIVEN }
        : { file, path: '', message: ENVOY_CONFIG_GIVEN },
    ]);
  }
  const top = fileSchema.safeParse(doc, { error: issueText });
  const issues = top.success ? [] : issuesOf(top.error, [], file);
  const list =
    isRecord(doc) && Array.isArray(doc['policies']) ? (doc['policies'] as unknown[]) : undefined;
  if (list === undefined) fail(issues);
  let set: PolicySet | undefined;
  try {
    set = parsePolicies(list, file, ['policies']);
  } catch (e) {
    if (!(e instanceof PolicyError)) throw e;
    issues.push(...e.issues);
  }
  const overload =
    isRecord(doc) && doc['overload'] !== undefined
      ? overloadIssues(doc['overload'], ['overload'], file)
      : undefined;
  if (overload !== undefined) issues.push(...overload.issues);
  if (issues.length > 0 || set === undefined) fail(issues);
  return overload?.config === undefined
    ? set
    : Object.freeze({ ...set, overload: deepFreeze(overload.config) });
}
