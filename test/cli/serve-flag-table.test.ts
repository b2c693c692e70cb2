/**
 * The `serve` flag table (src/cli/serve-flags.ts) and the settings schema name the same
 * flags for the same settings, so a flag documented in docs/cli.md is one `serve` takes.
 */
import { describe, expect, it } from 'vitest';
import { SERVE_FLAGS } from '../../src/cli/serve-flags.js';
import { SERVICE_SETTINGS, type SettingKey } from '../../src/service/env-settings.js';

const name = (spec: string): string => spec.split(' ')[0]!;

describe('serve flags', () => {
  it('each flag of the table is one its setting lists, and each is declared once', () => {
    const names = SERVE_FLAGS.map((f) => name(f.spec));
    expect(new Set(names).size).toBe(names.length);
    for (const f of SERVE_FLAGS) expect(SERVICE_SETTINGS[f.setting].flags).toContain(name(f.spec));
  });

  it("each flag a setting lists is in the table, but validate's --merge-domain-configs", () => {
    const listed = (Object.keys(SERVICE_SETTINGS) as SettingKey[]).flatMap((k) =>
      SERVICE_SETTINGS[k].flags.map((flag) => `${k} ${flag}`),
    );
    const table = SERVE_FLAGS.map((f) => `${f.setting} ${name(f.spec)}`);
    expect(listed.filter((l) => !table.includes(l))).toEqual([
      'mergeDomainConfig --merge-domain-configs',
    ]);
  });
});
