import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ERROR_CODES } from '../../src/core/error-codes.js';
import { PolicyError, StoreError } from '../../src/core/errors.js';

describe('error registry', () => {
  it('docs/errors.md lists exactly the registered codes, with the same facts', () => {
    const doc = readFileSync(join(import.meta.dirname, '../../docs/errors.md'), 'utf8');
    const rows = doc
      .split('\n')
      .filter((l) => l.startsWith('| `SLUICE_ERR_'))
      .map((l) =>
        l
          .split('|')
          .slice(1, -1)
          .map((c) => c.trim().replace(/^`|`$/g, '')),
      );
    const registry = Object.entries(ERROR_CODES).map(([code, i]) => [
      code,
      i.family,
      String(i.httpStatus),
      String(i.grpcStatus),
      i.summary,
    ]);
    expect(rows).toEqual(registry);
  });

  it('codes follow SLUICE_ERR_<AREA>_<WHAT>', () => {
    for (const code of Object.keys(ERROR_CODES))
      expect(code).toMatch(/^SLUICE_ERR_[A-Z]+_[A-Z_]+$/);
  });

  it('errors carry code, family, status, name and cause', () => {
    const cause = new Error('root');
    const p = new PolicyError('SLUICE_ERR_COST_INVALID', 'bad cost', { cause });
    expect([p.name, p.code, p.family, p.status, p.cause]).toEqual([
      'PolicyError',
      'SLUICE_ERR_COST_INVALID',
      'policy',
      'INVALID_POLICY',
      cause,
    ]);
    expect(p.issues).toEqual([{ path: '', message: 'bad cost' }]);
    const s = new StoreError('SLUICE_ERR_STORE_TIMEOUT', 'slow');
    expect([s.name, s.family, s.status]).toEqual(['StoreError', 'store', 'UNAVAILABLE']);
    // The reason: the code's when none is given, else the store's.
    expect(s.reason).toBe('timeout');
    expect(new StoreError('SLUICE_ERR_STORE_UNAVAILABLE', 'x').reason).toBe('script');
    expect(new StoreError('SLUICE_ERR_STORE_UNAVAILABLE', 'x', { reason: 'oom' }).reason).toBe(
      'oom',
    );
  });
});
