import { writeFile } from 'node:fs/promises';
import type { Command } from 'commander';
import { wholeNumber } from './option-values.js';

const pct = (v: number) => `${(v * 100).toFixed(2)}%`;

/** `sluice simulate leases`: the quota lease fleet on a virtual clock (docs/quota-leases.md). */
export function addSimulateCommand(program: Command, fail: (error: unknown) => never): void {
  const simulate = program
    .command('simulate')
    .description('Run a simulation of a Sluice architecture on a virtual clock');
  simulate
    .command('leases')
    .description(
      'Simulate quota leases (the real controller and agents) against static division and one global owner on the same shifting demand; deterministic per seed',
    )
    .option('--regions <n>', 'regions', wholeNumber('--regions', 2), 100)
    .option('--agents <n>', 'agents in all', wholeNumber('--agents', 2), 10_000)
    .option('--seconds <n>', 'simulated seconds', wholeNumber('--seconds', 60), 600)
    .option('--seed <n>', 'random seed', wholeNumber('--seed', 0), 1)
    .option('--svg <file>', 'where to write the chart', 'leases-simulation.svg')
    .option('--json', 'print the figures as one JSON object')
    .action(
      async (o: {
        regions: number;
        agents: number;
        seconds: number;
        seed: number;
        svg: string;
        json?: boolean;
      }) => {
        try {
          // Imported here so that other commands do not load the simulator.
          const [{ simulateLeases }, { simulationSvg }] = await Promise.all([
            import('../quota/simulation/simulate.js'),
            import('../quota/simulation/svg.js'),
          ]);
          const { report, series } = simulateLeases(o);
          await writeFile(o.svg, simulationSvg(report, series));
          if (o.json) {
            process.stdout.write(`${JSON.stringify({ ...report, svg: o.svg })}\n`);
            return;
          }
          const b = report.baselines;
          const p = report.partition;
          process.stdout.write(
            [
              `quota leases: ${report.regions} regions, ${report.agents} agents, ${report.seconds} s, seed ${report.seed}, budget ${report.budgetPerSecond}/s`,
              `  utilization while demand > budget  ${pct(report.utilization)}  (static division ${pct(b.staticDivision.utilization)}, one global owner ${pct(b.globalOwner.utilization)})`,
              `  peak over budget                   ${pct(report.peakOverBudget)}; outside the partition ${pct(report.peakOverBudgetOutsidePartition)}`,
              `  partition (region ${p.region}, ${p.agents} agents, ${(p.toMs - p.fromMs) / 1000} s): peak ${pct(p.peakOverBudget)}, ${p.extraUnits.toFixed(0)} units over; bound ${pct(report.partitionBound.peakRatio)}, ${report.partitionBound.extraUnits.toFixed(0)} units: ${p.withinBound ? 'within' : 'EXCEEDED'}`,
              `  failover: tokens ${report.failover.tokens.join(' -> ')}, ${report.failover.staleLeasesRefused} stale leases refused`,
              `  remote calls/s: leases ${report.reportsPerSecond.toFixed(0)} reports; one global owner ${b.globalOwner.remoteCallsPerSecond.toFixed(0)}`,
              `  chart: ${o.svg}`,
              '',
            ].join('\n'),
          );
        } catch (error) {
          fail(error);
        }
      },
    );
}
