import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { register as globalRegistry } from 'prom-client';
import { ServiceMetrics } from '../../src/metrics/service-metrics.js';
import { ControllerMetrics } from '../../src/metrics/controller-metrics.js';
import { ruleMetricKey } from '../../src/metrics/rule-key.js';
import { samplesOf, type Sample } from '../support/prometheus-text.js';

/** The value of the one sample named `name` whose labels are exactly `labels`. */
function value(all: Sample[], name: string, labels: Record<string, string>): number | undefined {
  return all.find(
    (s) =>
      s.name === name &&
      Object.keys(labels).length === Object.keys(s.labels).length &&
      Object.entries(labels).every(([k, v]) => s.labels[k] === v),
  )?.value;
}

describe('ServiceMetrics', () => {
  it('exposes per-rule hits by domain, rule and outcome, in hits', async () => {
    const m = new ServiceMetrics();
    m.recordRule('edge', 'tenant.path_/login', 'total_hits', 3);
    m.recordRule('edge', 'tenant.path_/login', 'total_hits', 2);
    m.recordRule('edge', 'tenant.path_/login', 'over_limit', 2);
    m.recordRule('other', 'tenant', 'within_limit', 1);
    const { body, contentType } = await m.metrics();
    expect(contentType).toMatch(/^text\/plain; version=0\.0\.4/);
    expect(body).toContain('# TYPE sluice_rule_hits_total counter');
    const all = samplesOf(body);
    const rule = { domain: 'edge', rule: 'tenant.path_/login' };
    expect(value(all, 'sluice_rule_hits_total', { ...rule, outcome: 'total_hits' })).toBe(5);
    expect(value(all, 'sluice_rule_hits_total', { ...rule, outcome: 'over_limit' })).toBe(2);
    expect(
      value(all, 'sluice_rule_hits_total', {
        domain: 'other',
        rule: 'tenant',
        outcome: 'within_limit',
      }),
    ).toBe(1);
  });

  it('records a whole check as upstream splits it, creating every outcome series', async () => {
    const m = new ServiceMetrics();
    // limit 20 → near threshold 16: 19 + 3 = 22 is 2 over and 1 near.
    m.recordRuleCheck('edge', 'key8_value8', { limit: 20, usedBefore: 19, hits: 3 });
    const all = samplesOf((await m.metrics()).body);
    const at = (outcome: string): number | undefined =>
      value(all, 'sluice_rule_hits_total', { domain: 'edge', rule: 'key8_value8', outcome });
    expect([
      at('total_hits'),
      at('over_limit'),
      at('near_limit'),
      at('within_limit'),
      at('shadow_mode'),
    ]).toEqual([3, 2, 1, 0, 0]);
  });

  it('applies its own near-limit ratio', async () => {
    const m = new ServiceMetrics({ nearLimitRatio: 0.5 });
    m.recordRuleCheck('d', 'r', { limit: 10, usedBefore: 4, hits: 2 }); // threshold 5: 1 near
    const all = samplesOf((await m.metrics()).body);
    expect(
      value(all, 'sluice_rule_hits_total', { domain: 'd', rule: 'r', outcome: 'near_limit' }),
    ).toBe(1);
    expect(() => new ServiceMetrics({ nearLimitRatio: 0 })).toThrow(RangeError);
    expect(() => new ServiceMetrics({ nearLimitRatio: 1.5 })).toThrow(RangeError);
  });

  it('keeps request values out of the rule label unless the rule is detailed', async () => {
    const m = new ServiceMetrics();
    const parts = [
      { key: 'tenant', value: 'acme-secret-tenant', valueInConfig: false },
      { key: 'path', value: '/login', valueInConfig: true },
    ];
    m.recordRuleCheck('edge', ruleMetricKey(parts), { limit: 10, usedBefore: 0, hits: 1 });
    let body = (await m.metrics()).body;
    expect(body).not.toContain('acme-secret-tenant');
    expect(
      samplesOf(body)
        .filter((s) => s.name === 'sluice_rule_hits_total')
        .map((s) => s.labels.rule),
    ).toEqual(Array(5).fill('tenant.path_/login'));

    m.recordRuleCheck('edge', ruleMetricKey(parts, true), { limit: 10, usedBefore: 0, hits: 1 });
    body = (await m.metrics()).body;
    expect(
      value(samplesOf(body), 'sluice_rule_hits_total', {
        domain: 'edge',
        rule: 'tenant_acme-secret-tenant.path_/login',
        outcome: 'total_hits',
      }),
    ).toBe(1);
  });

  it('escapes label values that need it', async () => {
    const m = new ServiceMetrics();
    m.recordRule('d', 'k_say "hi"\\\n', 'total_hits', 1);
    const all = samplesOf((await m.metrics()).body);
    expect(
      value(all, 'sluice_rule_hits_total', {
        domain: 'd',
        rule: 'k_say "hi"\\\n',
        outcome: 'total_hits',
      }),
    ).toBe(1);
  });

  it('caps the series of each family, admitting a rule with its five outcomes, and counts drops', async () => {
    const m = new ServiceMetrics({ maxSeriesPerMetric: 12 });
    // Rules take five series each: two fit under 12, the third is dropped whole.
    for (const rule of ['a', 'b', 'c', 'a']) {
      m.recordRuleCheck('d', rule, { limit: 10, usedBefore: 0, hits: 1 });
    }
    m.recordRule('d', 'c', 'total_hits', 1); // still no room for rule c
    for (let i = 0; i < 20; i++) m.recordDecision({ policy: `p${i}`, status: 'OK', path: 'store' });
    m.recordDecision({ policy: 'p0', status: 'OK', path: 'store' }); // a known series still counts
    const all = samplesOf((await m.metrics()).body);
    const rules = all.filter((x) => x.name === 'sluice_rule_hits_total');
    expect(new Set(rules.map((x) => x.labels.rule))).toEqual(new Set(['a', 'b']));
    expect(
      value(all, 'sluice_rule_hits_total', { domain: 'd', rule: 'a', outcome: 'total_hits' }),
    ).toBe(2);
    expect(all.filter((x) => x.name === 'sluice_decisions_total')).toHaveLength(12);
    expect(
      value(all, 'sluice_decisions_total', { policy: 'p0', status: 'OK', path: 'store' }),
    ).toBe(2);
    expect(
      value(all, 'sluice_metric_series_dropped_total', { metric: 'sluice_rule_hits_total' }),
    ).toBe(2);
    expect(
      value(all, 'sluice_metric_series_dropped_total', { metric: 'sluice_decisions_total' }),
    ).toBe(8);
    expect(() => new ServiceMetrics({ maxSeriesPerMetric: 0 })).toThrow(
      'maxSeriesPerMetric must be a positive whole number, got 0',
    );
  });

  it('shortens a label value over 512 characters to its start and a hash, keeping values apart', async () => {
    const m = new ServiceMetrics();
    const long = (tail: string) => `tenant_${'x'.repeat(600)}${tail}`;
    m.recordRuleCheck('d', long('1'), { limit: 10, usedBefore: 0, hits: 1 });
    m.recordRuleCheck('d', long('2'), { limit: 10, usedBefore: 0, hits: 1 });
    const rules = samplesOf((await m.metrics()).body)
      .filter((x) => x.name === 'sluice_rule_hits_total' && x.labels.outcome === 'total_hits')
      .map((x) => x.labels.rule!);
    expect(rules).toHaveLength(2);
    for (const rule of rules) {
      expect(rule).toHaveLength(512);
      expect(rule).toMatch(/^tenant_x{488}…[0-9a-f]{16}$/);
    }
    expect(rules[0]).not.toBe(rules[1]);
  });

  it('rejects unknown outcomes and bad hit counts', () => {
    const m = new ServiceMetrics();
    expect(() => m.recordRule('d', 'r', 'denied' as never, 1)).toThrow(/unknown rule outcome/);
    expect(() => m.recordRule('d', 'r', 'total_hits', -1)).toThrow(RangeError);
    expect(() => m.recordRule('d', 'r', 'total_hits', Number.NaN)).toThrow(RangeError);
  });

  it('exposes config loads, decisions, durations and store errors with their labels', async () => {
    const m = new ServiceMetrics({ durationBuckets: [0.01, 0.1] });
    m.recordConfigLoad('success');
    m.recordConfigLoad('success');
    m.recordConfigLoad('error');
    m.recordDecision({ policy: 'per-tenant', status: 'OVER_LIMIT', path: 'store' });
    m.recordDecision({ policy: 'per-tenant', status: 'OK', path: 'fail-open' });
    m.observeDecisionDuration('http', 'ShouldRateLimit', 5);
    m.observeDecisionDuration('grpc', 'Check', 50);
    m.recordStoreError('SLUICE_ERR_STORE_TIMEOUT', 'timeout');
    const { body } = await m.metrics();
    const all = samplesOf(body);
    expect(value(all, 'sluice_config_load_total', { result: 'success' })).toBe(2);
    expect(value(all, 'sluice_config_load_total', { result: 'error' })).toBe(1);
    expect(
      value(all, 'sluice_decisions_total', {
        policy: 'per-tenant',
        status: 'OVER_LIMIT',
        path: 'store',
      }),
    ).toBe(1);
    expect(
      value(all, 'sluice_decisions_total', {
        policy: 'per-tenant',
        status: 'OK',
        path: 'fail-open',
      }),
    ).toBe(1);
    expect(body).toContain('# TYPE sluice_decision_duration_seconds histogram');
    const http = { transport: 'http', method: 'ShouldRateLimit' };
    expect(value(all, 'sluice_decision_duration_seconds_bucket', { le: '0.01', ...http })).toBe(1);
    expect(value(all, 'sluice_decision_duration_seconds_count', http)).toBe(1);
    const grpc = { transport: 'grpc', method: 'Check' };
    expect(value(all, 'sluice_decision_duration_seconds_bucket', { le: '0.01', ...grpc })).toBe(0);
    expect(value(all, 'sluice_decision_duration_seconds_bucket', { le: '0.1', ...grpc })).toBe(1);
    expect(
      value(all, 'sluice_store_errors_total', {
        code: 'SLUICE_ERR_STORE_TIMEOUT',
        reason: 'timeout',
      }),
    ).toBe(1);
  });

  it('keeps each instance in its own registry, never the global one', async () => {
    const a = new ServiceMetrics();
    const b = new ServiceMetrics(); // same metric names: no "already registered" error
    a.recordConfigLoad('error');
    expect(
      value(samplesOf((await b.metrics()).body), 'sluice_config_load_total', { result: 'error' }),
    ).toBeUndefined();
    expect(await globalRegistry.metrics()).not.toContain('sluice_');
  });
});

describe('docs/metrics.md', () => {
  const doc = readFileSync(join(import.meta.dirname, '../../docs/metrics.md'), 'utf8');
  const controllerStart = doc.indexOf('\n## Quota controller');
  const controllerEnd = doc.indexOf('\n## ', controllerStart + 1);
  const familiesIn = (text: string) =>
    [...text.matchAll(/^\| `(sluice_[a-z_]+)`/gm)].map((m) => m[1]).sort();

  it('lists exactly the metrics ServiceMetrics exposes, outside the controller section', async () => {
    expect(controllerStart).toBeGreaterThan(0);
    const documented = familiesIn(doc.slice(0, controllerStart) + doc.slice(controllerEnd));
    const exposed = (await new ServiceMetrics().registry.getMetricsAsJSON())
      .map((m) => m.name)
      .sort();
    expect(documented).toEqual(exposed);
  });

  it('lists exactly the metrics ControllerMetrics exposes in its section', async () => {
    const documented = familiesIn(doc.slice(controllerStart, controllerEnd));
    const idle = { connected: false, leading: false, term: 0, agents: {}, buckets: [] };
    const exposed = (
      await new ControllerMetrics({ status: () => idle }).registry.getMetricsAsJSON()
    )
      .map((m) => m.name)
      .sort();
    expect(documented).toEqual(exposed);
  });
});
