import { bucketBytes } from '../algorithms/costs.js';
import { algorithmOf } from '../algorithms/index.js';
import type { Policy } from '../core/policy.js';
import { scopeKeysOf } from '../stores/key.js';
import {
  CONNECTIONS_PER_PROCESS_PER_PRIMARY,
  SERVICE_CPU_US_PER_CALL,
  type Measured,
} from './measured-costs.js';

/** What `sluice plan` is asked. */
export interface PlanInput {
  readonly policies: readonly Policy[];
  /** Requests per second at peak, over the whole fleet; each is checked against every policy. */
  readonly peakRps: number;
  /** Distinct identities (tenants) active within a bucket's idle TTL. */
  readonly tenants: number;
  /**
   * Zipf exponent of traffic over tenants: 1 as the benchmarks draw it, 0 for an even
   * spread. @default 1
   */
  readonly zipf?: number;
  /** Share of one core a Redis primary or a service process may use at peak. @default 0.5 */
  readonly targetUtilization?: number;
}

/** One policy's part of the plan. */
export interface PolicyPlan {
  readonly name: string;
  readonly algorithm: string;
  /** Buckets (Redis keys): one per tenant, or one for a global policy; per scope value. */
  readonly keys: number;
  /**
   * The policy has scope keys (a per-route limit): it holds `keys` buckets per scope value
   * (route), a count the plan cannot know.
   */
  readonly perScopeValue: boolean;
  readonly bytes: number;
  readonly bytesPerKey: number;
  /** Redis CPU per decision, µs. */
  readonly cpuUsPerDecision: number;
  /** How long an idle bucket lives, ms (the algorithm's TTL). */
  readonly ttlMs: number;
  /** Keys expiring per second, at most. */
  readonly expiriesPerSecond: number;
}

/** The plan: every figure at peak. */
export interface CapacityPlan {
  readonly input: Required<Omit<PlanInput, 'policies'>> & { readonly policies: readonly string[] };
  /** Decisions per second (requests × policies). */
  readonly decisionsPerSecond: number;
  /** Redis CPU at peak, in cores (one core = one primary's whole event loop). */
  readonly redisCores: number;
  /** Primaries needed so that none is above the target utilization (hot key allowing). */
  readonly shards: number;
  /** Primaries needed for the CPU alone, spread evenly. */
  readonly shardsForCpu: number;
  readonly hotKey: {
    /** Share of all decisions that the busiest tenant makes. */
    readonly tenantShare: number;
    /** Share of all decisions that land on the busiest shard (that tenant's). */
    readonly shardShare: number;
    /** That shard's CPU, in cores. */
    readonly shardCores: number;
    /** The busiest tenant's own CPU, in cores: no shard count lowers it. */
    readonly tenantCores: number;
    /** Whether the busiest tenant alone exceeds the target utilization of a primary. */
    readonly exceedsOneShard: boolean;
  };
  readonly keys: number;
  readonly bytes: number;
  readonly bytesPerShard: number;
  readonly expiriesPerSecond: number;
  /** `sluice serve` processes needed for the calls, at the target utilization. */
  readonly serviceProcesses: number;
  /** Redis connections: processes × primaries. */
  readonly connections: number;
  readonly policies: readonly PolicyPlan[];
  /** Every constant used, with where it was measured. */
  readonly sources: Readonly<Record<string, Measured>>;
}

/** The most primaries `plan` looks at while spreading a hot shard. */
const MAX_SHARDS = 1000;

function positive(name: string, v: number, whole: boolean): void {
  if (!(Number.isFinite(v) && v > 0 && (!whole || Number.isSafeInteger(v)))) {
    throw new RangeError(`${name} must be a ${whole ? 'whole ' : ''}number > 0, got ${v}`);
  }
}

/** Σ 1/k^s for k = 1..n: the Zipf normalizer. Exact up to 10⁶ terms, then an integral. */
export function harmonic(n: number, s: number): number {
  const exact = Math.min(n, 1_000_000);
  let h = 0;
  for (let k = exact; k >= 1; k--) h += 1 / k ** s;
  if (n > exact) {
    // ∫ from exact+½ to n+½ of x^(-s) dx: the tail's sum to within 1e-12 of h here.
    const a = exact + 0.5;
    const b = n + 0.5;
    h += s === 1 ? Math.log(b / a) : (b ** (1 - s) - a ** (1 - s)) / (1 - s);
  }
  return h;
}

/**
 * A capacity plan from measured per-decision costs (`measured-costs.ts`). Each request is
 * checked against every policy (an upper bound when policies match different requests).
 * Throws `RangeError` for a non-positive input or no policy.
 *
 * - Redis CPU = decisions/s × measured µs per decision of each policy's algorithm.
 * - Shards: enough primaries that each stays under `targetUtilization` of a core with an
 *   even spread; then more while the busiest shard (the busiest tenant's, which also gets
 *   its even share of the rest) is over it, unless that tenant alone is over it, which no
 *   shard count helps (docs/design.md#stages: local stages, batching or leases do).
 * - The busiest tenant's share under Zipf(s) over `tenants` is 1 / H(tenants, s).
 * - Keys: one per tenant per policy (one for a global policy); a policy with scope keys
 *   (a per-route limit) holds one per scope value, which the plan cannot know: it counts one.
 * - Bytes: measured `used_memory` per bucket; a sliding log at its full limit.
 * - Expiry: a bucket expires after its TTL idle, at most once per TTL and never more often
 *   than it is written: min(keys / TTL, decisions of the policy per second).
 * - Connections: service processes (measured CPU per call at `targetUtilization`) × primaries.
 */
export function capacityPlan(input: PlanInput): CapacityPlan {
  positive('peak requests per second', input.peakRps, false);
  positive('tenants', input.tenants, true);
  const zipf = input.zipf ?? 1;
  if (!(Number.isFinite(zipf) && zipf >= 0)) throw new RangeError(`zipf must be >= 0, got ${zipf}`);
  const target = input.targetUtilization ?? 0.5;
  if (!(target > 0 && target <= 1)) {
    throw new RangeError(`target utilization must be in (0, 1], got ${target}`);
  }
  if (input.policies.length === 0) throw new RangeError('the policy file has no policy');

  const rps = input.peakRps;
  const policies = input.policies.map((p): PolicyPlan => {
    const algorithm = algorithmOf(p.algorithm);
    const keys = p.identity.length === 0 ? 1 : input.tenants;
    // A bucket whose state grows with what it admitted is sized at its full capacity.
    const bytesPerKey = bucketBytes(algorithm.costs, algorithm.capacity(p.params));
    const ttlMs = algorithm.ttlMs(p.params);
    return {
      name: p.name,
      algorithm: p.algorithm,
      keys,
      perScopeValue: scopeKeysOf(p).length > 0,
      bytesPerKey,
      bytes: keys * bytesPerKey,
      cpuUsPerDecision: algorithm.costs.redisCpuUsPerDecision.value,
      ttlMs,
      expiriesPerSecond: Math.min(rps, keys / (ttlMs / 1000)),
    };
  });
  const redisCores = policies.reduce((sum, p) => sum + (rps * p.cpuUsPerDecision) / 1e6, 0);
  const tenantShare = 1 / harmonic(input.tenants, zipf);
  // The busiest tenant's decisions go to one shard; its policies share its hash tag.
  const tenantCores = redisCores * tenantShare;
  const shardCores = (shards: number): number => tenantCores + (redisCores - tenantCores) / shards;
  const shardsForCpu = Math.max(1, Math.ceil(redisCores / target - 1e-9));
  let shards = shardsForCpu;
  const exceedsOneShard = tenantCores > target;
  if (!exceedsOneShard) {
    while (shardCores(shards) > target + 1e-12 && shards < MAX_SHARDS) shards++;
  }
  const keys = policies.reduce((sum, p) => sum + p.keys, 0);
  const bytes = policies.reduce((sum, p) => sum + p.bytes, 0);
  const serviceProcesses = Math.max(
    1,
    Math.ceil((rps * SERVICE_CPU_US_PER_CALL.value) / 1e6 / target - 1e-9),
  );
  const sources: Record<string, Measured> = {};
  for (const kind of new Set(input.policies.map((q) => q.algorithm))) {
    const costs = algorithmOf(kind).costs;
    sources[`Redis CPU per decision, ${kind}`] = costs.redisCpuUsPerDecision;
    sources[`Redis memory per bucket, ${kind}`] = costs.redisBytesPerBucket;
    if (costs.redisBytesPerExtraUnit !== undefined) {
      sources[`Redis memory per ${kind} entry`] = costs.redisBytesPerExtraUnit;
    }
  }
  sources['service CPU per call'] = SERVICE_CPU_US_PER_CALL;
  sources['Redis connections per process per primary'] = CONNECTIONS_PER_PROCESS_PER_PRIMARY;
  return {
    input: {
      policies: input.policies.map((p) => p.name),
      peakRps: rps,
      tenants: input.tenants,
      zipf,
      targetUtilization: target,
    },
    decisionsPerSecond: rps * policies.length,
    redisCores,
    shards,
    shardsForCpu,
    hotKey: {
      tenantShare,
      shardShare: shardCores(shards) / redisCores,
      shardCores: shardCores(shards),
      tenantCores,
      exceedsOneShard,
    },
    keys,
    bytes,
    bytesPerShard: bytes / shards,
    expiriesPerSecond: policies.reduce((sum, p) => sum + p.expiriesPerSecond, 0),
    serviceProcesses,
    connections: serviceProcesses * shards * CONNECTIONS_PER_PROCESS_PER_PRIMARY.value,
    policies,
    sources,
  };
}
