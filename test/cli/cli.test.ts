import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';

const run = promisify(execFile);
const root = join(import.meta.dirname, '../..');
const bin = join(root, 'dist/cli/main.js');

async function sluiceWithEnv(
  env: Record<string, string>,
  ...args: string[]
): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await run(process.execPath, [bin, ...args], {
      cwd: root,
      env: { ...process.env, ...env },
    });
    return { code: 0, stdout, stderr };
  } catch (e) {
    const err = e as { code: number; stdout: string; stderr: string };
    return { code: err.code, stdout: err.stdout, stderr: err.stderr };
  }
}

const sluice = (...args: string[]) => sluiceWithEnv({}, ...args);

describe('sluice CLI (built dist/, spawned)', () => {
  it('serve refuses an unreadable upstream setting, naming it, before listening', async () => {
    const r = await sluiceWithEnv(
      { LIMIT_RESPONSE_HEADERS_ENABLED: 'yes' },
      'serve',
      '--config',
      'examples/envoy',
      '--port',
      '0',
      '--grpc-port',
      '0',
    );
    expect(r.code).toBe(1);
    expect(r.stderr).toBe(
      'sluice: LIMIT_RESPONSE_HEADERS_ENABLED: expected a boolean (1, t, T, TRUE, true, True, 0, f, F, FALSE, false, False), got "yes" [SLUICE_ERR_CONFIG_INVALID]\n',
    );
  });

  it('check: four transfers of cost 5 fit the burst of 20, the fifth is denied with its retry-after', async () => {
    const r = await sluice(
      'check',
      '--config',
      'test/cli/fixtures/slow.yaml',
      '--repeat',
      '5',
      'tenant=acme',
      'route=POST /transfers',
    );
    expect(r.code).toBe(0);
    const lines = r.stdout.trim().split('\n');
    expect(lines.slice(0, 4).every((l) => l.includes('allowed OK'))).toBe(true);
    expect(lines[3]).toContain('policy=payments-tenant remaining=0/20');
    expect(lines[4]).toMatch(
      /^#5 denied\s+OVER_LIMIT\s+policy=payments-tenant remaining=0\/20 retry_after_ms=(1799\d{4}|18000000)$/,
    ); // 5 units at 1 per hour
  });

  it('check --json prints decisions as JSON', async () => {
    const r = await sluice(
      'check',
      '-c',
      'examples/policies.yaml',
      '--json',
      '--cost',
      '3',
      'tenant=acme',
    );
    const d = JSON.parse(r.stdout) as {
      request: number;
      allowed: boolean;
      decisions: { remaining: number }[];
    };
    expect(d).toMatchObject({ request: 1, allowed: true, status: 'OK' });
    expect(d.decisions[0]!.remaining).toBe(17);
  });

  it('check: a malformed descriptor argument and a too-large cost are clear errors, exit 1', async () => {
    const bad = await sluice('check', '-c', 'examples/policies.yaml', 'tenant');
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('descriptor entry "tenant" must look like key=value');
    const big = await sluice('check', '-c', 'examples/policies.yaml', '--cost', '21', 'tenant=a');
    expect(big.code).toBe(1);
    expect(big.stderr).toContain(
      'cost 21 exceeds the capacity 20 of policy "payments-tenant": it could never be admitted [SLUICE_ERR_COST_EXCEEDS_CAPACITY]',
    );
  });

  it('validate: ok for the example, every issue and exit 1 for a broken file', async () => {
    const ok = await sluice('validate', 'examples/policies.yaml');
    expect(ok).toMatchObject({ code: 0, stdout: 'examples/policies.yaml: ok (1 policy)\n' });
    const bad = await sluice('validate', 'test/config/fixtures/many-issues.yaml');
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain('sluice: 3 problems [SLUICE_ERR_CONFIG_INVALID]:\n');
    expect(bad.stderr).toContain(
      '  test/config/fixtures/many-issues.yaml: policies[1].algorithm: ',
    );
  });
  it('validate: an envoyproxy/ratelimit directory prints what config_check prints, exit 0', async () => {
    const dir = 'test/cli/fixtures/envoy-ok';
    const expected = [
      'checking rate limit configs...',
      `loading config directory: ${dir}`,
      `opening config file: ${dir}/a-payments.yaml`,
      `opening config file: ${dir}/b-search.yaml`,
      'all rate limit configs ok',
      '',
    ].join('\n');
    expect(await sluice('validate', dir)).toEqual({ code: 0, stdout: expected, stderr: '' });
    // upstream's flag spellings
    expect(await sluice('validate', '-config_dir', dir)).toMatchObject({
      code: 0,
      stdout: expected,
    });
    expect(await sluice('validate', `-config_dir=${dir}`)).toMatchObject({
      code: 0,
      stdout: expected,
    });
  });

  it('validate: a file with a top-level domain: is envoy config', async () => {
    const ok = await sluice('validate', 'examples/envoy/config.yaml');
    expect(ok).toMatchObject({ code: 0, stderr: '' });
    expect(ok.stdout).toContain('all rate limit configs ok\n');
    const bad = await sluice('validate', 'test/cli/fixtures/envoy-bad-unit.yaml');
    expect(bad.code).toBe(1);
    expect(bad.stderr).toBe(
      "error loading rate limit configs: test/cli/fixtures/envoy-bad-unit.yaml: invalid rate limit unit 'fortnight'\n",
    );
    expect(bad.stdout).not.toContain('all rate limit configs ok');
  });

  it('validate: two files with one domain fail unless domains are merged', async () => {
    const dir = 'test/cli/fixtures/envoy-dup';
    const dup = await sluice('validate', dir);
    expect(dup.code).toBe(1);
    expect(dup.stderr).toBe(
      `error loading rate limit configs: ${dir}/two.yaml: duplicate domain 'payments' in config file\n`,
    );
    const merged = await sluice('validate', '-config_dir', dir, '-merge_domain_configs');
    expect(merged).toMatchObject({ code: 0, stderr: '' });
    expect(merged.stdout).toContain('all rate limit configs ok\n');
  });

  it('validate: --format overrides detection; --config-dir must be a directory', async () => {
    const forced = await sluice('validate', '--format', 'envoy', 'examples/policies.yaml');
    expect(forced.code).toBe(1);
    expect(forced.stderr).toBe(
      "error loading rate limit configs: examples/policies.yaml: config error, unknown key 'policies'\n",
    );
    const notDir = await sluice('validate', '--config-dir', 'examples/envoy/config.yaml');
    expect(notDir.code).toBe(1);
    expect(notDir.stderr).toBe(
      'error opening directory examples/envoy/config.yaml: not a directory\n',
    );
  });
});
