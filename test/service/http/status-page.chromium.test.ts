/**
 * The status page in a real headless Chromium (Debian's `chromium`, driven by
 * playwright-core): the real service on a real redis-server (behind a fault proxy, for
 * the outage), real checks over HTTP (allowed, denied, shadow would-deny, fail-closed),
 * then `/status` as a browser shows it. The screenshot goes to a temporary directory;
 * `npm run docs:status-page` (SLUICE_UPDATE_DOCS=1) writes it to docs/status-page.png.
 */
import { copyFile, mkdtemp, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningService } from '../../../src/service/main.js';
import type { StatusSnapshot } from '../../../src/service/status/status-snapshot.js';
import { identityHash } from '../../../src/stores/identity-hash.js';
import { ensureDebianCommand } from '../../support/debian-package.js';
import type { FaultProxy } from '../../support/fault-proxy.js';
import type { RedisServer } from '../../support/redis-server.js';
import { startServiceBehindProxy } from '../../support/service-behind-proxy.js';
import { waitFor } from '../../support/wait.js';

const POLICIES = join(import.meta.dirname, '../fixtures/status/policies.yaml');
const DOC_IMAGE = join(import.meta.dirname, '../../../docs/status-page.png');
// Distinctive raw identities: the page must never show them, only their hashes.
const ACME = 'tenant-acme-raw-7731';
const GLOBEX = 'tenant-globex-raw-4410';

let redis: RedisServer;
let proxy: FaultProxy;
let svc: RunningService;
let browser: Browser;
let page: Page;
let shots: string;

async function check(tenant: string, route: string, requestId?: string): Promise<number> {
  const r = await fetch(`http://127.0.0.1:${svc.httpPort}/v1/check`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      entries: [
        { key: 'tenant', value: tenant },
        { key: 'route', value: route },
      ],
      ...(requestId === undefined ? {} : { requestId }),
    }),
  });
  await r.arrayBuffer();
  return r.status;
}

/** What the page script reads of a `<tr>` (the tests' TypeScript has no DOM types). */
interface TableRow {
  readonly cells: ArrayLike<{ readonly innerText: string }>;
}

/** The cells of the row whose first cell is `first`, in the section `#id`. */
async function row(id: string, first: string): Promise<string[]> {
  const rows = await page
    .locator(`#${id} tbody tr`)
    .evaluateAll((trs) =>
      trs.map((tr) => Array.from((tr as unknown as TableRow).cells, (td) => td.innerText)),
    );
  const found = rows.filter((r) => r[0] === first);
  expect(found, `rows of #${id} starting ${first} in ${JSON.stringify(rows)}`).toHaveLength(1);
  return found[0]!;
}

// The long timeout: a fresh machine installs the Debian package first
// (test/support/debian-package.ts).
beforeAll(async () => {
  const executablePath = await ensureDebianCommand('chromium', 'chromium');
  ({ redis, proxy, svc } = await startServiceBehindProxy({ policiesFile: POLICIES }));
  // Running as root (CI containers) needs --no-sandbox.
  browser = await chromium.launch({ executablePath, args: ['--no-sandbox'] });
  page = await browser.newPage({ viewport: { width: 1100, height: 900 } });
  shots = await mkdtemp(join(tmpdir(), 'sluice-status-'));
}, 600_000);

afterAll(async () => {
  await browser?.close();
  await svc?.shutdown();
  await proxy?.close();
  await redis?.stop();
  if (shots !== undefined) await rm(shots, { recursive: true, force: true });
});

describe('GET /status in Chromium', () => {
  it('shows the policies, decisions, denials, shadow would-deny, hashed hot keys and store health', async () => {
    // payments-tenant (burst 3 a minute): acme 3 allowed then 2 denied.
    const acme = [];
    for (let i = 0; i < 5; i++) acme.push(await check(ACME, 'GET /transfers', `req-${i}`));
    expect(acme).toEqual([200, 200, 200, 429, 429]);
    // exports-shadow (burst 1, shadow): globex's second export would be denied, never is.
    expect([await check(GLOBEX, 'POST /exports'), await check(GLOBEX, 'POST /exports')]).toEqual([
      200, 200,
    ]);

    const response = await page.goto(`http://127.0.0.1:${svc.httpPort}/status`);
    expect(response?.status()).toBe(200);
    expect(response?.headers()['content-type']).toBe('text/html; charset=utf-8');
    expect(await page.locator('h1').innerText()).toBe('Sluice status');

    expect(await row('policies', 'payments-tenant')).toEqual([
      'payments-tenant',
      'sluice',
      'token-bucket',
      'capacity 3, full after 3 min idle',
      'closed',
      'no',
    ]);
    expect((await row('policies', 'exports-shadow')).at(-1)).toBe('yes');
    // decisions, denied, would-deny; then the same over the last minute.
    expect(await row('decisions', 'payments-tenant')).toEqual([
      'payments-tenant',
      '7',
      '2',
      '0',
      '7',
      '2',
      '0',
    ]);
    expect(await row('decisions', 'exports-shadow')).toEqual([
      'exports-shadow',
      '2',
      '0',
      '1',
      '2',
      '0',
      '1',
    ]);
    expect(await row('shadow', 'exports-shadow')).toEqual(['exports-shadow', '1', '1']);
    // Hot keys: the identities' hashes with their request counts; never the identities.
    expect(await row('hot-keys', identityHash(ACME))).toEqual([identityHash(ACME), '5']);
    expect(await row('hot-keys', identityHash(GLOBEX))).toEqual([identityHash(GLOBEX), '2']);
    const text = await page.locator('body').innerText();
    expect(text).not.toContain(ACME);
    expect(text).not.toContain(GLOBEX);
    expect(await row('store', 'redis')).toEqual(['redis', 'healthy', 'up', '–', '–']);
    expect(await page.locator('#leases p').innerText()).toBe(
      'No lease is in force: this service takes no quota leases (SLUICE_LEASE_CONTROLLERS is not set).',
    );

    const shot = join(shots, 'status-page.png');
    await page.screenshot({ path: shot, fullPage: true });
    expect((await stat(shot)).size).toBeGreaterThan(10_000);
    if (process.env['SLUICE_UPDATE_DOCS'] === '1') await copyFile(shot, DOC_IMAGE);

    // The same snapshot as JSON.
    const json = (await (
      await fetch(`http://127.0.0.1:${svc.httpPort}/status?format=json`)
    ).json()) as StatusSnapshot;
    expect(json.decisions.find((d) => d.policy === 'payments-tenant')?.total).toEqual({
      decisions: 7,
      denied: 2,
      wouldDeny: 0,
    });
    expect(JSON.stringify(json)).not.toContain(ACME);
  });

  it('shows the store unhealthy during an outage, the fail-closed denials, and healthy again after', async () => {
    proxy.blackhole();
    expect(await check(ACME, 'GET /transfers')).toBe(503); // closed: UNAVAILABLE
    await page.reload();
    const down = await row('store', 'redis');
    expect(down.slice(0, 3)).toEqual(['redis', 'unhealthy', 'up']);
    expect(down[3]).toMatch(/^\d{4}-\d\d-\d\dT/);
    expect(down[4]).toMatch(/^timeout 1$/);
    // The fail-closed denial counts as a denial of its policy.
    expect((await row('decisions', 'payments-tenant')).slice(1, 3)).toEqual(['8', '3']);

    proxy.heal();
    proxy.resetAll(); // the swallowed command would leave the reply stream out of step
    let attempt = 0;
    await waitFor(
      async () =>
        (await check(`tenant-after-${attempt++}`, 'GET /transfers')) === 200 ? true : undefined,
      { what: 'a check answered by the store after the outage', timeoutMs: 10_000, intervalMs: 50 },
    );
    await page.reload();
    expect((await row('store', 'redis')).slice(0, 2)).toEqual(['redis', 'healthy']);
  });
});
