/**
 * Writes the settings table of docs/cli.md (between the settings-table markers) from
 * the settings table in src/service/settings/. A test keeps the two equal
 * (test/docs/settings-doc.test.ts). Run: `npm run docs:settings`.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { format, resolveConfig } from 'prettier';
import { settingsTableMarkdown } from '../../src/service/settings/docs-table.js';

export const CLI_MD = fileURLToPath(new URL('../cli.md', import.meta.url));
export const TABLE_START = '<!-- settings-table:start (npm run docs:settings) -->';
export const TABLE_END = '<!-- settings-table:end -->';

/** docs/cli.md with its settings table made from the settings table. */
export async function cliDocWithTable(text: string): Promise<string> {
  const start = text.indexOf(TABLE_START);
  const end = text.indexOf(TABLE_END);
  if (start < 0 || end < start)
    throw new Error(`${CLI_MD}: the settings-table markers are missing`);
  const next = `${text.slice(0, start + TABLE_START.length)}\n\n${settingsTableMarkdown()}\n\n${text.slice(end)}`;
  return format(next, { ...(await resolveConfig(CLI_MD)), parser: 'markdown', filepath: CLI_MD });
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  writeFileSync(CLI_MD, await cliDocWithTable(readFileSync(CLI_MD, 'utf8')));
}
