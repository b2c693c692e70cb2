import type { Logger } from 'pino';
import { formatIssue, PolicyError } from '../core/errors.js';
import { leasedPolicyProblems } from './leased-policies.js';
import type { ServeOptions } from './serve-options.js';
import type { LoadedConfig } from './service-config.js';
import { policiesInForce } from './status/policies-in-force.js';

/* What the service says about the config it loads: its log lines, and its refusals. */

/**
 * Refuses leased names that no rule or policy of `config` goes by, or whose rule has a
 * bucket per value (`leasedPolicyProblems`), naming the setting, so that a typo is not a
 * policy silently left to the store.
 */
export function checkLeasedPolicies(
  leases: NonNullable<ServeOptions['leases']>,
  config: LoadedConfig,
): void {
  const problems = leasedPolicyProblems(leases.policies, config.envoy, config.policies);
  if (problems.length === 0) return;
  const path = leases.policiesSetting ?? 'leases.policies';
  const issues = problems.map((message) => ({ path, message }));
  throw new PolicyError('SLUICE_ERR_CONFIG_INVALID', issues.map(formatIssue).join('\n'), {
    issues,
  });
}

/** The files a load read (directories are listed by the files in them). */
export function filesOf(config: LoadedConfig): string[] {
  return config.watch.filter((w) => !w.entries).map((w) => w.path);
}

/** The one line of a successful load: its files and the policies and rules now in force. */
export function logConfigLoaded(log: Logger, config: LoadedConfig, message: string): void {
  log.info(
    {
      result: 'ok',
      files: filesOf(config),
      policies: policiesInForce(config.envoy, config.policies).map((p) => p.name),
      domains: Object.keys(config.envoy.domains),
    },
    message,
  );
}

/**
 * Says so when no rule is loaded: every request is then allowed. Upstream starts the
 * same way with its file loader (it waits for a first config only from an xDS server,
 * without FORCE_START_WITHOUT_INITIAL_CONFIG) and logs a warning; so does Sluice, naming
 * why nothing was read.
 */
export function warnIfEmpty(config: LoadedConfig, log: Logger): void {
  if (Object.keys(config.envoy.domains).length > 0 || config.policies !== undefined) return;
  log.warn(
    { reasons: config.envoy.warnings.map(formatIssue) },
    'no rate limit config loaded: every request is allowed',
  );
}
