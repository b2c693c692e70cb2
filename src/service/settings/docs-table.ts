import type { SettingSpec } from './setting.js';
import { SETTING_ENTRIES } from './table.js';

/** The columns of the settings table in docs/cli.md. */
export const SETTINGS_TABLE_HEADER = ['variable', 'flag', 'allowed', 'default', 'option'] as const;

/** Where a setting goes in `ServeOptions`, as the docs say it. */
function optionCell(spec: SettingSpec): string {
  const parts: string[] = [];
  if (spec.target !== undefined) parts.push(`\`${spec.target}\``);
  if (spec.feeds !== undefined) parts.push(`\`${spec.feeds}\` (with others)`);
  if (spec.opens !== undefined && spec.opens !== spec.target)
    parts.push(`turns \`${spec.opens}\` on`);
  return parts.length === 0 ? 'read by the envoy config loader' : parts.join('; ');
}

/** The rows of the table, cell by cell, as the table in docs/cli.md has them. */
export function settingsTableRows(): string[][] {
  return SETTING_ENTRIES.map(([, spec]) => [
    `\`${spec.env}\``,
    spec.flags
      .map((f) => `\`${f.spec.split(' ')[0]!}\`${f.command === undefined ? '' : ` (${f.command})`}`)
      .join(', '),
    spec.allowed,
    spec.shownDefault,
    optionCell(spec),
  ]);
}

/** The table as Markdown (unaligned; prettier aligns it). */
export function settingsTableMarkdown(): string {
  const row = (cells: readonly string[]): string =>
    `| ${cells.map((c) => c.replace(/\|/g, '\\|')).join(' | ')} |`;
  return [
    row(SETTINGS_TABLE_HEADER),
    row(SETTINGS_TABLE_HEADER.map(() => '---')),
    ...settingsTableRows().map(row),
  ].join('\n');
}
