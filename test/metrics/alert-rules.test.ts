/**
 * deploy/prometheus/sluice-rules.yml through promtool (Debian's `prometheus` package):
 * the rules are valid, and sluice-rules.test.yml's scenarios pass, each firing its own
 * alert and none of the other three. A copy of the rules without the clause that keeps
 * a rollout apart from a rise in over-limit traffic fails those tests: they can fail.
 */
import { execFile } from 'node:child_process';
import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { ensureDebianCommand } from '../support/debian-package.js';

const run = promisify(execFile);
const dir = join(import.meta.dirname, '../../deploy/prometheus');
const RULES = join(dir, 'sluice-rules.yml');
const TESTS = join(dir, 'sluice-rules.test.yml');

/** The four alerts that must stay apart, by the scenario that must fire each. */
const APART: Readonly<Record<string, string>> = {
  'over-limit': 'SluiceOverLimitRise',
  outage: 'SluiceOutage',
  saturation: 'SluiceRedisSaturated',
  rollout: 'SluicePolicyRolloutOvermatch',
};

interface AlertTest {
  eval_time: string;
  alertname: string;
  exp_alerts: unknown[];
}

let promtool: string;
let scratch: string;

/** promtool's exit code and output (stdout and stderr). */
async function promtoolRun(...args: string[]): Promise<{ code: number; out: string }> {
  try {
    const { stdout, stderr } = await run(promtool, args, { cwd: dir });
    return { code: 0, out: stdout + stderr };
  } catch (error) {
    const e = error as { code?: number; stdout?: string; stderr?: string };
    return { code: e.code ?? -1, out: (e.stdout ?? '') + (e.stderr ?? '') };
  }
}

beforeAll(async () => {
  promtool = await ensureDebianCommand('promtool', 'prometheus');
  scratch = mkdtempSync(join(tmpdir(), 'sluice-rules-'));
}, 600_000);
afterAll(() => {
  if (scratch !== undefined) rmSync(scratch, { recursive: true, force: true });
});

describe('deploy/prometheus/sluice-rules.yml', () => {
  it('passes promtool check rules', async () => {
    const { code, out } = await promtoolRun('check', 'rules', RULES);
    expect(out).toMatch(/SUCCESS: \d+ rules found/);
    expect(code).toBe(0);
  });

  it('has a scenario per alert case that asserts all four alerts, its own firing and the others not', () => {
    const doc = parse(readFileSync(TESTS, 'utf8')) as {
      tests: { name: string; alert_rule_test: AlertTest[] }[];
    };
    for (const [scenario, own] of Object.entries(APART)) {
      const t = doc.tests.find((x) => x.name === scenario);
      expect(t, scenario).toBeDefined();
      const at = (name: string) =>
        t!.alert_rule_test.find((a) => a.eval_time === '120m' && a.alertname === name);
      for (const alert of Object.values(APART)) {
        const expected = at(alert);
        expect(expected, `${scenario}: ${alert}`).toBeDefined();
        expect(expected!.exp_alerts.length > 0, `${scenario}: ${alert}`).toBe(alert === own);
      }
    }
  });

  it('passes promtool test rules: each case fires its own alert only', async () => {
    const { code, out } = await promtoolRun('test', 'rules', TESTS);
    expect(out, out).toContain('SUCCESS');
    expect(code).toBe(0);
  });

  it('fails those tests without the clause that keeps a rollout apart from an over-limit rise', async () => {
    const rules = readFileSync(RULES, 'utf8');
    const clause =
      '          unless on (job, policy)\n            (sluice:policy_match_share:ratio5m > 1.5 * (sluice:policy_match_share:ratio5m offset 1h))\n';
    expect(rules).toContain(clause);
    writeFileSync(join(scratch, 'sluice-rules.yml'), rules.replace(clause, ''));
    copyFileSync(TESTS, join(scratch, 'sluice-rules.test.yml'));
    const { code, out } = await promtoolRun(
      'test',
      'rules',
      join(scratch, 'sluice-rules.test.yml'),
    );
    expect(code).not.toBe(0);
    expect(out).toMatch(/name: rollout,\s+alertname: SluiceOverLimitRise/);
  });
});
