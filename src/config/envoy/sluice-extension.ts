import type { z } from 'zod';
import { ALGORITHMS, ALGORITHM_KINDS, type AlgorithmKind } from '../../algorithms/index.js';
import { type BatchSettings, type FailureMode, type LocalSettings } from '../../core/policy.js';
import { issueText } from '../issue-text.js';
import { POLICY_NAME } from '../policies.js';
import { batchSchema, localSchema, stageSettingsProblems } from '../stage-settings.js';
import {
  DECISION_MODES,
  unitToMs,
  type DecisionMode,
  type EnvoyUnit,
  type SluiceRuleOptions,
} from './envoy-config.js';
import { collapsed, type GoNode } from './yaml-tree.js';

/** Fields of a rule's `sluice:` block. */
export const SLUICE_FIELDS = Object.freeze([
  'algorithm',
  'batch',
  'burst',
  'failure_mode',
  'local',
  'name',
] as const);

/** Fields of the top-level `sluice:` block, the domain's settings. */
export const SLUICE_DOMAIN_FIELDS = Object.freeze(['decision'] as const);

/** The top-level `sluice:` block as written. */
export interface SluiceDomainExtension {
  readonly decision?: DecisionMode;
}

const FAILURE_MODES: readonly FailureMode[] = ['open', 'closed', 'stale'];
/** The algorithms with a capacity apart from their rate, which a `burst` sets. */
const CAPACITY_ALGORITHMS: readonly AlgorithmKind[] = ALGORITHM_KINDS.filter(
  (k) => ALGORITHMS[k].hasBurst,
);

/** The `sluice:` block as written, before defaults. */
export interface SluiceExtension {
  readonly algorithm?: AlgorithmKind;
  readonly burst?: number;
  readonly failureMode?: FailureMode;
  readonly name?: string;
  readonly local?: LocalSettings;
  readonly batch?: BatchSettings;
}

/** The rate limit a `sluice:` block sits beside. */
export interface RuleBasis {
  readonly requestsPerUnit: number;
  readonly unit?: EnvoyUnit;
  readonly unlimited: boolean;
}

/** A problem found at a path: `[path, message]`. */
export type Problem = [string, string];

function scalarText(node: GoNode): string | undefined {
  return node.kind === 'scalar' && node.typed.kind !== 'nil' ? node.text : undefined;
}

/** Reads a `sluice:` block; every problem is reported, with its path. */
export function parseSluiceExtension(
  node: GoNode,
  path: string,
  problems: Problem[],
): SluiceExtension {
  const out: { -readonly [K in keyof SluiceExtension]: SluiceExtension[K] } = {};
  if (node.kind !== 'map') {
    problems.push([path, `expected a map with any of ${SLUICE_FIELDS.join(', ')}`]);
    return out;
  }
  for (const { key, value } of collapsed(node)) {
    const field = scalarText(key) ?? '';
    const at = `${path}.${field}`;
    const text = scalarText(value);
    switch (field) {
      case 'algorithm':
        if (text !== undefined && (ALGORITHM_KINDS as readonly string[]).includes(text)) {
          out.algorithm = text as AlgorithmKind;
        } else {
          problems.push([at, `expected one of ${ALGORITHM_KINDS.join(', ')}; got ${show(value)}`]);
        }
        break;
      case 'burst': {
        const v = value.kind === 'scalar' ? value.typed.value : undefined;
        if (typeof v === 'bigint' && v >= 1n && v <= BigInt(Number.MAX_SAFE_INTEGER)) {
          out.burst = Number(v);
        } else {
          problems.push([
            at,
            `expected a whole number from 1 to ${Number.MAX_SAFE_INTEGER}; got ${show(value)}`,
          ]);
        }
        break;
      }
      case 'failure_mode':
        if (text !== undefined && (FAILURE_MODES as readonly string[]).includes(text)) {
          out.failureMode = text as FailureMode;
        } else {
          problems.push([at, `expected one of ${FAILURE_MODES.join(', ')}; got ${show(value)}`]);
        }
        break;
      case 'local': {
        const v = blockSetting(localSchema, value, at, problems);
        if (v !== undefined) out.local = v;
        break;
      }
      case 'batch': {
        const v = blockSetting(batchSchema, value, at, problems);
        if (v !== undefined) out.batch = v;
        break;
      }
      case 'name':
        if (text !== undefined && POLICY_NAME.test(text)) out.name = text;
        else {
          problems.push([
            at,
            `must start with a letter or digit and use only letters, digits, "_", "." or "-" (at most 128); got ${show(value)}`,
          ]);
        }
        break;
      default:
        problems.push([
          path,
          `unknown field '${field}' (expected one of ${SLUICE_FIELDS.join(', ')})`,
        ]);
    }
  }
  return out;
}

/** Reads the top-level `sluice:` block (the domain's settings); every problem is reported. */
export function parseSluiceDomainExtension(
  node: GoNode,
  path: string,
  problems: Problem[],
): SluiceDomainExtension {
  const out: { -readonly [K in keyof SluiceDomainExtension]: SluiceDomainExtension[K] } = {};
  if (node.kind !== 'map') {
    problems.push([path, `expected a map with ${SLUICE_DOMAIN_FIELDS.join(', ')}`]);
    return out;
  }
  for (const { key, value } of collapsed(node)) {
    const field = scalarText(key) ?? '';
    const text = scalarText(value);
    if (field === 'decision') {
      if (text !== undefined && (DECISION_MODES as readonly string[]).includes(text)) {
        out.decision = text as DecisionMode;
      } else {
        problems.push([
          `${path}.decision`,
          `expected one of ${DECISION_MODES.join(', ')}; got ${show(value)}`,
        ]);
      }
    } else {
      const rule = (SLUICE_FIELDS as readonly string[]).includes(field)
        ? ` ('${field}' belongs in a descriptor's sluice block)`
        : '';
      problems.push([
        path,
        `unknown field '${field}' (expected ${SLUICE_DOMAIN_FIELDS.join(', ')})${rule}`,
      ]);
    }
  }
  return out;
}

/** A YAML node as plain data (ints as numbers), for the schemas that policy files use too. */
function plain(node: GoNode): unknown {
  if (node.kind === 'map') {
    const out: Record<string, unknown> = Object.create(null) as Record<string, unknown>;
    for (const { key, value } of collapsed(node)) out[scalarText(key) ?? ''] = plain(value);
    return out;
  }
  if (node.kind === 'seq') return node.items.map(plain);
  const v = node.typed.value;
  return typeof v === 'bigint' ? Number(v) : v;
}

/** A `local:` or `batch:` block through the policy files' schema; its problems, with paths. */
function blockSetting<T>(
  schema: z.ZodType<T>,
  node: GoNode,
  at: string,
  problems: Problem[],
): T | undefined {
  const parsed = schema.safeParse(plain(node), { error: issueText });
  if (parsed.success) return parsed.data;
  for (const i of parsed.error.issues) {
    problems.push([[at, ...i.path.map(String)].join('.'), i.message]);
  }
  return undefined;
}

function show(node: GoNode): string {
  if (node.kind !== 'scalar') return `a ${node.kind === 'map' ? 'map' : 'list'}`;
  return node.typed.kind === 'nil' ? 'nothing' : JSON.stringify(node.text);
}

/**
 * Validated algorithm parameters (times in ms) for `requestsPerUnit` per `unit`, or the
 * algorithm's own messages when they do not fit. `requestsPerUnit` must be at least 1.
 */
export function ruleParams(
  kind: AlgorithmKind,
  requestsPerUnit: number,
  unit: EnvoyUnit,
  burst?: number,
): { params: Readonly<Record<string, number | string>> } | { errors: string[] } {
  const algorithm = ALGORITHMS[kind];
  const parsed = algorithm.paramsSchema.safeParse(
    algorithm.paramsFor(requestsPerUnit, unitToMs(unit), burst),
  );
  if (!parsed.success) return { errors: parsed.error.issues.map((i) => i.message) };
  return { params: Object.freeze(parsed.data as Record<string, number | string>) };
}

/**
 * Applies a rule's `sluice:` extension (or none) to its rate limit: checks that each
 * field makes sense for this rule and fills in the defaults (fixed window of one unit).
 */
export function sluiceRuleOptions(
  ext: SluiceExtension,
  basis: RuleBasis,
  path: string,
  problems: Problem[],
): SluiceRuleOptions {
  const algorithm = ext.algorithm ?? 'fixed-window';
  const base: SluiceRuleOptions = {
    algorithm,
    ...(ext.burst === undefined ? {} : { burst: ext.burst }),
    ...(ext.failureMode === undefined ? {} : { failureMode: ext.failureMode }),
    ...(ext.name === undefined ? {} : { name: ext.name }),
    ...(ext.local === undefined ? {} : { local: ext.local }),
    ...(ext.batch === undefined ? {} : { batch: ext.batch }),
  };
  const fields: [keyof SluiceExtension, string][] = [
    ['algorithm', 'algorithm'],
    ['burst', 'burst'],
    ['failureMode', 'failure_mode'],
    ['local', 'local'],
    ['batch', 'batch'],
  ];
  if (basis.unlimited || basis.unit === undefined) {
    for (const [field, yamlName] of fields) {
      if (ext[field] !== undefined) {
        problems.push([`${path}.${yamlName}`, 'does not apply to an unlimited rate_limit']);
      }
    }
    return base;
  }
  if (basis.requestsPerUnit === 0) {
    if (
      ext.burst !== undefined ||
      ext.local !== undefined ||
      ext.batch !== undefined ||
      (ext.algorithm ?? 'fixed-window') !== 'fixed-window'
    ) {
      const field =
        ext.burst !== undefined
          ? 'burst'
          : ext.local !== undefined
            ? 'local'
            : ext.batch !== undefined
              ? 'batch'
              : 'algorithm';
      problems.push([
        `${path}.${field}`,
        'does not apply when requests_per_unit is 0 (every request is denied)',
      ]);
    }
    return base;
  }
  if (ext.burst !== undefined && !CAPACITY_ALGORITHMS.includes(algorithm)) {
    problems.push([
      `${path}.burst`,
      `only applies to algorithms ${CAPACITY_ALGORITHMS.join(', ')}; this rule uses ${algorithm}`,
    ]);
    return base;
  }
  const built = ruleParams(algorithm, basis.requestsPerUnit, basis.unit, ext.burst);
  if ('errors' in built) {
    for (const e of built.errors) problems.push([path, `${algorithm}: ${e}`]);
    return base;
  }
  const problemsOfStages = stageSettingsProblems(
    {
      algorithm,
      params: built.params,
      capacity: ALGORITHMS[algorithm].capacity(built.params as never),
      maxCost: 1,
      shadow: false,
    },
    ext.local,
    ext.batch,
  );
  for (const p of problemsOfStages) problems.push([[path, ...p.path].join('.'), p.message]);
  return { ...base, params: built.params };
}
