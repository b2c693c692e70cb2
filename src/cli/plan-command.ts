import { InvalidArgumentError, type Command } from 'commander';
import { positiveNumber, wholeNumber } from './option-values.js';

/**
 * `sluice plan`: a capacity plan for a policy file. The planner and the policy loader
 * are imported inside the action, so that other commands do not pay for loading them.
 */
export function addPlanCommand(program: Command, fail: (error: unknown) => never): void {
  program
    .command('plan')
    .description(
      "Capacity plan for a policy file on Redis at a peak load, from Sluice's measured per-decision costs (docs/operations.md)",
    )
    .requiredOption('--policies <file>', 'Sluice policy file (YAML or JSON)')
    .requiredOption(
      '--peak-rps <n>',
      'requests per second at peak, whole fleet',
      positiveNumber('--peak-rps'),
    )
    .requiredOption(
      '--tenants <n>',
      'distinct identities active within a bucket TTL',
      wholeNumber('--tenants', 1),
    )
    .option(
      '--zipf <s>',
      'Zipf exponent of traffic over tenants (0: even)',
      (v: string) => {
        const n = /^\s*[0-9.eE+]+\s*$/.test(v) ? Number(v) : NaN;
        if (!(n >= 0 && Number.isFinite(n)))
          throw new InvalidArgumentError('--zipf must be a number >= 0');
        return n;
      },
      1,
    )
    .option(
      '--target-utilization <r>',
      'share of a core each Redis primary and service process may use at peak',
      positiveNumber('--target-utilization', 1),
      0.5,
    )
    .option('--json', 'print the plan as JSON')
    .action(
      async (o: {
        policies: string;
        peakRps: number;
        tenants: number;
        zipf: number;
        targetUtilization: number;
        json?: boolean;
      }) => {
        try {
          const [{ loadPolicyFile }, { capacityPlan }, { planText }] = await Promise.all([
            import('../config/load.js'),
            import('../capacity/capacity-plan.js'),
            import('./plan-text.js'),
          ]);
          const set = await loadPolicyFile(o.policies);
          const plan = capacityPlan({
            policies: set.policies,
            peakRps: o.peakRps,
            tenants: o.tenants,
            zipf: o.zipf,
            targetUtilization: o.targetUtilization,
          });
          process.stdout.write(o.json ? `${JSON.stringify(plan, null, 2)}\n` : planText(plan));
        } catch (error) {
          fail(error);
        }
      },
    );
}
