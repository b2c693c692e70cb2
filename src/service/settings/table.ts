import { z } from 'zod';
import { LEASE_SETTINGS } from './leases-settings.js';
import { RULES_SETTINGS } from './rules-settings.js';
import { SERVER_SETTINGS } from './server-settings.js';
import type { SettingSpec } from './setting.js';
import { STORE_SETTINGS } from './store-settings.js';
import { TELEMETRY_SETTINGS } from './telemetry-settings.js';

/**
 * Every setting `sluice serve` reads, one entry per environment variable, in the order
 * the docs list them. To add one: add an entry to the group file it belongs to (the
 * variable, its flags, how its text is read, its default, where it goes in
 * `ServeOptions`, its docs text), run `npm run docs:settings` and, when upstream has the
 * variable, add a row to docs/migrating-from-envoy-ratelimit.md.
 */
export const SERVICE_SETTINGS = {
  ...SERVER_SETTINGS,
  ...STORE_SETTINGS,
  ...RULES_SETTINGS,
  ...TELEMETRY_SETTINGS,
  ...LEASE_SETTINGS,
} as const satisfies Record<string, SettingSpec>;

export type SettingKey = keyof typeof SERVICE_SETTINGS;

/** The table's entries with their keys, in order. */
export const SETTING_ENTRIES = Object.entries(SERVICE_SETTINGS) as [SettingKey, SettingSpec][];

type Shape = { [K in SettingKey]: (typeof SERVICE_SETTINGS)[K]['value'] };

/** The zod schema of the settings' text, keyed like {@link SERVICE_SETTINGS}. */
export const serviceSettingsSchema = z
  .object(Object.fromEntries(SETTING_ENTRIES.map(([key, spec]) => [key, spec.value])) as Shape)
  .strict();

/** The settings' values once read. */
export type ParsedSettings = z.output<typeof serviceSettingsSchema>;
