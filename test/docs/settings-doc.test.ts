/**
 * The environment variables the docs list are the ones the settings table reads:
 * docs/cli.md's table is the one the settings table makes (`npm run docs:settings`),
 * cell for cell, and the rows of docs/migrating-from-envoy-ratelimit.md that say Sluice
 * reads a variable are in the table.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { SERVICE_SETTINGS } from '../../src/service/env-settings.js';
import { settingsTableRows } from '../../src/service/settings/docs-table.js';
import { cliDocWithTable } from '../../docs/scripts/settings-table.js';

const doc = (name: string): string =>
  readFileSync(join(import.meta.dirname, '../../docs', name), 'utf8');

/** The cells of every row of the first table under `heading`. */
function tableUnder(text: string, heading: string): string[][] {
  const start = text.indexOf(`\n${heading}\n`);
  expect(start, `${heading} is in the doc`).toBeGreaterThanOrEqual(0);
  const lines = text.slice(start).split('\n');
  const first = lines.findIndex((l) => l.startsWith('|'));
  const rows: string[][] = [];
  for (const line of lines.slice(first + 2)) {
    if (!line.startsWith('|')) break;
    rows.push(
      line
        .split(/(?<!\\)\|/)
        .slice(1, -1)
        .map((c) => c.trim().replace(/\\\|/g, '|')),
    );
  }
  return rows;
}

/** The `code spans` of a cell. */
const spans = (cell: string): string[] => [...cell.matchAll(/`([^`]+)`/g)].map((m) => m[1]!);

const specs = Object.values(SERVICE_SETTINGS);

describe('environment variables: docs and schema agree', () => {
  it('docs/cli.md has the table the settings table makes, cell for cell', () => {
    const rows = tableUnder(doc('cli.md'), '## Environment variables');
    expect(rows).toEqual(settingsTableRows());
    expect(rows.map((r) => spans(r[0]!)[0])).toEqual(specs.map((s) => s.env));
  });

  it('regenerating docs/cli.md leaves no diff (run `npm run docs:settings`)', async () => {
    const text = doc('cli.md');
    expect(await cliDocWithTable(text)).toBe(text);
  });

  it("the migrating guide's variables that Sluice reads are in the schema, and every upstream variable of the schema is there", () => {
    const rows = tableUnder(doc('migrating-from-envoy-ratelimit.md'), '## Environment variables');
    const read = rows.filter((r) => !/^(not supported|not read)/.test(r[2]!));
    const named = read.flatMap((r) => spans(r[0]!));
    const inSchema = (name: string): boolean => {
      const pattern = new RegExp(`^${name.replace(/\*/g, '[A-Z_]*')}$`);
      return specs.some((s) => pattern.test(s.env));
    };
    expect(named.filter((n) => !inSchema(n))).toEqual([]);
    const documented = (env: string): boolean =>
      named.some((n) => new RegExp(`^${n.replace(/\*/g, '[A-Z_]*')}$`).test(env));
    expect(specs.filter((s) => s.upstream && !documented(s.env)).map((s) => s.env)).toEqual([]);
    // A Sluice-only variable is not presented as upstream's.
    expect(specs.filter((s) => !s.upstream && documented(s.env)).map((s) => s.env)).toEqual([]);
  });
});
