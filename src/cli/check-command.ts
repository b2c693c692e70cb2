import type { Command } from 'commander';
import { parseDescriptorArgs } from './descriptor-args.js';
import { wholeNumber } from './option-values.js';

/**
 * `sluice check`: decisions against a policy file on the embedded memory store. The
 * limiter and the policy loader are imported inside the action, so that other commands
 * do not pay for loading them.
 */
export function addCheckCommand(program: Command, fail: (error: unknown) => never): void {
  program
    .command('check')
    .description(
      'Decide requests against a policy file on the embedded memory store and print each decision',
    )
    .requiredOption('-c, --config <file>', 'policy file (YAML or JSON)')
    .option(
      '--cost <n>',
      'units each request consumes (overrides the policy cost rules)',
      wholeNumber('--cost', 0),
    )
    .option('-n, --repeat <n>', 'how many requests to send', wholeNumber('--repeat', 1), 1)
    .option('--interval <ms>', 'milliseconds between requests', wholeNumber('--interval', 0), 0)
    .option('-p, --policy <name...>', 'check only these policies')
    .option('--json', 'print one JSON object per decision')
    .argument('<entries...>', 'descriptor entries, in order, as key=value (e.g. tenant=acme)')
    .action(
      async (
        entries: string[],
        o: {
          config: string;
          cost?: number;
          repeat: number;
          interval: number;
          policy?: string[];
          json?: boolean;
        },
      ) => {
        try {
          const descriptor = parseDescriptorArgs(entries);
          const [{ createLimiter }, { loadPolicyFile }, { MemoryStore }] = await Promise.all([
            import('../local/create-limiter.js'),
            import('../config/load.js'),
            import('../stores/memory/memory-store.js'),
          ]);
          const limiter = createLimiter({
            store: new MemoryStore(),
            policies: await loadPolicyFile(o.config),
          });
          for (let i = 1; i <= o.repeat; i++) {
            const r = await limiter.check(descriptor, {
              ...(o.cost === undefined ? {} : { cost: o.cost }),
              ...(o.policy === undefined ? {} : { policies: o.policy }),
            });
            if (o.json) {
              process.stdout.write(`${JSON.stringify({ request: i, ...r })}\n`);
            } else {
              const d = r.decision;
              const detail = d
                ? `policy=${d.policy} remaining=${Math.floor(d.remaining)}/${d.limit} retry_after_ms=${Math.ceil(r.retryAfterMs)}`
                : 'no policy matched';
              process.stdout.write(
                `#${i} ${r.allowed ? 'allowed' : 'denied '} ${r.status.padEnd(10)} ${detail}\n`,
              );
            }
            if (o.interval > 0 && i < o.repeat)
              await new Promise((res) => setTimeout(res, o.interval));
          }
        } catch (error) {
          fail(error);
        }
      },
    );
}
