/**
 * Criticality levels of Google's SRE practice ("Handling Overload"), highest first. Under
 * overload a level is shed only once every lower level is being shed.
 */
export const CRITICALITIES = Object.freeze([
  'CRITICAL_PLUS',
  'CRITICAL',
  'SHEDDABLE_PLUS',
  'SHEDDABLE',
] as const);

/** How much a request matters when capacity is short. */
export type Criticality = (typeof CRITICALITIES)[number];

/** The level of a request that says nothing (SRE: the default of production traffic). */
export const DEFAULT_CRITICALITY: Criticality = 'CRITICAL';

/** 0 for `CRITICAL_PLUS` … 3 for `SHEDDABLE`: lower ranks are served first. */
export function criticalityRank(c: Criticality): number {
  return CRITICALITIES.indexOf(c);
}

/**
 * Reads a criticality written by a trusted caller (`critical-plus`, `CRITICAL_PLUS`,
 * `Sheddable`); `undefined` for anything else. Never trust this from the open internet:
 * any client could claim `CRITICAL_PLUS`.
 */
export function parseCriticality(value: string | undefined): Criticality | undefined {
  if (value === undefined) return undefined;
  const v = value.trim().toUpperCase().replace(/-/g, '_');
  return (CRITICALITIES as readonly string[]).includes(v) ? (v as Criticality) : undefined;
}
