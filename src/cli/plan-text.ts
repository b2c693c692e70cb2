import type { CapacityPlan } from '../capacity/capacity-plan.js';

const whole = (v: number): string => Math.round(v).toLocaleString('en-US');
const fixed = (v: number, digits: number): string =>
  v.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });
const percent = (v: number): string => `${fixed(v * 100, 1)}%`;

function bytes(v: number): string {
  if (v < 1024) return `${whole(v)} B`;
  if (v < 1024 ** 2) return `${fixed(v / 1024, 1)} KiB`;
  if (v < 1024 ** 3) return `${fixed(v / 1024 ** 2, 1)} MiB`;
  return `${fixed(v / 1024 ** 3, 2)} GiB`;
}

function ms(v: number): string {
  return v < 1000 ? `${whole(v)} ms` : `${fixed(v / 1000, v < 10_000 ? 1 : 0)} s`;
}

/** `sluice plan`'s text: one line per figure, then each policy, then the sources. */
export function planText(plan: CapacityPlan): string {
  const i = plan.input;
  const target = percent(i.targetUtilization);
  const h = plan.hotKey;
  const lines = [
    `Capacity plan: ${whole(i.peakRps)} requests/s at peak, ${whole(i.tenants)} tenants (Zipf s=${i.zipf}), each request checked against ${plan.policies.length === 1 ? 'the policy' : `all ${plan.policies.length} policies`}`,
    '',
    `decisions         ${whole(plan.decisionsPerSecond)}/s`,
    `Redis CPU         ${fixed(plan.redisCores, 2)} cores at peak`,
    `shards            ${plan.shards} primar${plan.shards === 1 ? 'y' : 'ies'} (each at most ${target} of a core; ${plan.shardsForCpu} for the CPU alone)`,
    `hot key           the busiest tenant makes ${percent(h.tenantShare)} of decisions (${fixed(h.tenantCores, 2)} cores); its shard takes ${percent(h.shardShare)} of the load (${fixed(h.shardCores, 2)} cores; an even share is ${percent(1 / plan.shards)})`,
    ...(h.exceedsOneShard
      ? [
          `                  that tenant alone is over ${target} of a core, which no shard count changes: use a local stage, batching or leases for it`,
        ]
      : []),
    `keys              ${whole(plan.keys)} (${bytes(plan.bytes)} of Redis memory; ${bytes(plan.bytesPerShard)} per primary)`,
    `expiry            at most ${whole(plan.expiriesPerSecond)} keys/s expire`,
    `connections       ${whole(plan.connections)} to Redis: ${plan.serviceProcesses} sluice serve process${plan.serviceProcesses === 1 ? '' : 'es'} (each at most ${target} of a core) × ${plan.shards} primar${plan.shards === 1 ? 'y' : 'ies'}`,
    '',
    'per policy:',
    ...plan.policies.map(
      (p) =>
        `  ${p.name}: ${p.algorithm}, ${fixed(p.cpuUsPerDecision, 2)} µs of Redis CPU per decision, ${whole(p.keys)} keys${p.perScopeValue ? ' per scope value' : ''} × ${whole(p.bytesPerKey)} B, idle TTL ${ms(p.ttlMs)}, at most ${whole(p.expiriesPerSecond)} expiries/s`,
    ),
    '',
    'measured costs used:',
    ...Object.entries(plan.sources).map(
      ([name, m]) =>
        `  ${name}: ${fixed(m.value, m.value % 1 === 0 ? 0 : 2)} ${m.unit} (${m.source})`,
    ),
  ];
  return `${lines.join('\n')}\n`;
}
