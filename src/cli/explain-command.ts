import { InvalidArgumentError, Option, type Command } from 'commander';
import type { PolicyBounds } from '../local/bounds.js';
import type { SettleBounds } from '../local/settle-bounds.js';
import { positiveNumber, wholeNumber } from './option-values.js';

/**
 * `sluice explain`: what the local stages (and, with --lease-refresh, quota leases)
 * permit on a fleet. Its bound modules and the policy loader are imported inside the
 * action, so that other commands do not pay for loading them.
 */
export function addExplainCommand(program: Command, fail: (error: unknown) => never): void {
  program
    .command('explain')
    .description(
      'Print per policy what the local stages permit on a fleet: fleet burst, units held outside the global owner, overshoot and under-use bounds, remote calls, each failure mode with the store down',
    )
    .requiredOption('--policies <file>', 'policy file (YAML or JSON)')
    .requiredOption(
      '--instances <n>',
      'how many limiter instances share the store',
      wholeNumber('--instances', 1),
    )
    .option('--rps <r>', 'requests per second to one key across the fleet', positiveNumber('--rps'))
    .option(
      '--lease-refresh <ms>',
      'with quota leases: the report and lease period R; adds the partition bound to each policy',
      wholeNumber('--lease-refresh', 1),
    )
    .option('--lease-ttl <ms>', 'the lease TTL L (default 3 × R)', wholeNumber('--lease-ttl', 1))
    .option(
      '--partition <ms>',
      'how long agents are cut off from the controller (default 5 × R)',
      wholeNumber('--partition', 0),
    )
    .option(
      '--cut-off <n>',
      'how many of the instances are cut off (default all)',
      wholeNumber('--cut-off', 0),
    )
    .addOption(
      new Option('--fallback <kind>', "the agents' fallback once their lease expires")
        .choices(['static', 'deny', 'store'])
        .default('static'),
    )
    .option(
      '--election-ttl <ms>',
      "the controllers' election TTL E (default L / 3, at least 300)",
      wholeNumber('--election-ttl', 1),
    )
    .option(
      '--pause <ms>',
      'how long the leader is paused (default 2 × the election TTL)',
      wholeNumber('--pause', 0),
    )
    .option(
      '--reconnect <ms>',
      "an agent's wait before it tries the next controller (default 200)",
      wholeNumber('--reconnect', 0),
    )
    .option(
      '--controllers <n>',
      'how many controllers an agent tries in turn (default 2)',
      wholeNumber('--controllers', 1),
    )
    .option('--json', 'print the same as JSON')
    .action(
      async (o: {
        policies: string;
        instances: number;
        rps?: number;
        leaseRefresh?: number;
        leaseTtl?: number;
        partition?: number;
        cutOff?: number;
        fallback: 'static' | 'deny' | 'store';
        electionTtl?: number;
        pause?: number;
        reconnect?: number;
        controllers?: number;
        json?: boolean;
      }) => {
        try {
          const leaseOnly = [
            'leaseTtl',
            'partition',
            'cutOff',
            'electionTtl',
            'pause',
            'reconnect',
            'controllers',
          ] as const;
          const stray = leaseOnly.find((k) => o[k] !== undefined);
          if (o.leaseRefresh === undefined && stray !== undefined)
            throw new InvalidArgumentError(
              `--${stray.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)} needs --lease-refresh`,
            );
          if (o.cutOff !== undefined && o.cutOff > o.instances)
            throw new InvalidArgumentError(
              `--cut-off must be at most --instances (${o.instances})`,
            );
          const [
            { loadPolicyFile },
            { formatBounds, policyBounds },
            { algorithmOf },
            { defaultElectionTtlMs, leaseFailureSections, partitionBoundSection },
            { settleBounds, settleBoundsSection },
          ] = await Promise.all([
            import('../config/load.js'),
            import('../local/bounds.js'),
            import('../algorithms/index.js'),
            import('../quota/bounds.js'),
            import('../local/settle-bounds.js'),
          ]);
          // A policy with a settle block: what its reservations hold and let through.
          const withSettle = (b: PolicyBounds, s: SettleBounds | undefined): PolicyBounds =>
            s === undefined
              ? b
              : { ...b, settle: s, sections: [...b.sections, settleBoundsSection(s)] };
          const set = await loadPolicyFile(o.policies);
          const all = set.policies.map((p): PolicyBounds => {
            const b = withSettle(policyBounds(p, o.instances, o.rps), settleBounds(p));
            const refreshMs = o.leaseRefresh;
            if (refreshMs === undefined) return b;
            // The budget is the policy's global rate; a static fallback is an equal share of it.
            const budget = algorithmOf(p.algorithm).sustainedRate(p.params).perSecond;
            const cutOff = o.cutOff ?? o.instances;
            const leaseTtlMs = o.leaseTtl ?? 3 * refreshMs;
            const share = o.fallback === 'static' ? budget / o.instances : 0;
            const lease = partitionBoundSection({
              budgetPerSecond: budget,
              refreshMs,
              leaseTtlMs,
              partitionMs: o.partition ?? 5 * refreshMs,
              fallbackRatePerSecond: cutOff * share,
              agents: o.instances,
            });
            const electionTtlMs = o.electionTtl ?? defaultElectionTtlMs(leaseTtlMs);
            const failures = leaseFailureSections({
              budgetPerSecond: budget,
              refreshMs,
              leaseTtlMs,
              electionTtlMs,
              reconnectMs: o.reconnect ?? 200,
              controllers: o.controllers ?? 2,
              pauseMs: o.pause ?? 2 * electionTtlMs,
              fleetFallbackPerSecond: o.instances * share,
              agentFallbackPerSecond: share,
            });
            return { ...b, sections: [...b.sections, lease, ...failures] };
          });
          process.stdout.write(
            o.json === true ? `${JSON.stringify(all, null, 2)}\n` : formatBounds(all),
          );
        } catch (error) {
          fail(error);
        }
      },
    );
}
