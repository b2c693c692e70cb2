#!/usr/bin/env node
import { Command, InvalidArgumentError } from 'commander';
import { loadPolicyFile } from '../config/load.js';
import { SluiceError } from '../core/errors.js';
import { createLimiter } from '../limiter/limiter.js';
import { MemoryStore } from '../stores/memory/memory-store.js';
import { startService } from '../service/main.js';
import { parseDescriptorArgs } from './descriptor-args.js';

function wholeNumber(name: string, min: number) {
  return (v: string): number => {
    const n = Number(v);
    if (!Number.isSafeInteger(n) || n < min)
      throw new InvalidArgumentError(`${name} must be a whole number >= ${min}`);
    return n;
  };
}

function fail(error: unknown): never {
  const message = error instanceof Error ? error.message : String(error);
  const code = error instanceof SluiceError ? ` [${error.code}]` : '';
  process.stderr.write(`sluice: ${message}${code}\n`);
  process.exit(error instanceof SluiceError && error.family === 'policy' ? 1 : 2);
}

const program = new Command()
  .name('sluice')
  .description('Sluice: a distributed rate limiter. See docs/ for the full guide.')
  .showHelpAfterError();

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

const env = process.env;
const envBool = (v: string | undefined): boolean | undefined =>
  v === undefined ? undefined : ['1', 't', 'T', 'true', 'TRUE', 'True'].includes(v);

program
  .command('serve')
  .description(
    'Run the rate limit service: envoy RLS v3 gRPC, HTTP /json, /v1/check, /healthcheck, /metrics, /rlconfig',
  )
  .option(
    '--config <path>',
    'envoyproxy/ratelimit YAML file or directory (default: RUNTIME_ROOT/RUNTIME_SUBDIRECTORY/RUNTIME_APPDIRECTORY)',
  )
  .option('--policies <file>', 'Sluice-native policy file for /v1/check and sluice.v1')
  .option(
    '--port <n>',
    'HTTP port (env PORT)',
    wholeNumber('--port', 0),
    Number(env['PORT'] ?? 8080),
  )
  .option(
    '--grpc-port <n>',
    'gRPC port (env GRPC_PORT)',
    wholeNumber('--grpc-port', 0),
    Number(env['GRPC_PORT'] ?? 8081),
  )
  .option('--host <addr>', 'HTTP bind address (env HOST)', env['HOST'] ?? '0.0.0.0')
  .option('--grpc-host <addr>', 'gRPC bind address (env GRPC_HOST)', env['GRPC_HOST'] ?? '0.0.0.0')
  .option(
    '--redis <url>',
    'Redis URL (env REDIS_URL); default: the embedded memory store',
    env['REDIS_URL'],
  )
  .action(
    async (o: {
      config?: string;
      policies?: string;
      port: number;
      grpcPort: number;
      host: string;
      grpcHost: string;
      redis?: string;
    }) => {
      try {
        const running = await startService({
          ...(o.config === undefined ? {} : { envoyConfig: o.config }),
          ...(o.policies === undefined ? {} : { policiesFile: o.policies }),
          ...(o.redis === undefined ? {} : { redisUrl: o.redis }),
          port: o.port,
          grpcPort: o.grpcPort,
          host: o.host,
          grpcHost: o.grpcHost,
          keyPrefix: env['CACHE_KEY_PREFIX'] ?? 'sl',
          shadowMode: envBool(env['SHADOW_MODE']) ?? false,
          mergeDomainConfig: envBool(env['MERGE_DOMAIN_CONFIG']) ?? false,
        });
        const stop = (): void => {
          void running.shutdown().then(() => process.exit(0));
        };
        process.once('SIGTERM', stop);
        process.once('SIGINT', stop);
      } catch (error) {
        fail(error);
      }
    },
  );

program
  .command('validate')
  .description('Validate a policy file; print every problem and exit 1 when there is one')
  .argument('<file>', 'policy file (YAML or JSON)')
  .action(async (file: string) => {
    try {
      const set = await loadPolicyFile(file);
      process.stdout.write(
        `${file}: ok (${set.policies.length} ${set.policies.length === 1 ? 'policy' : 'policies'})\n`,
      );
    } catch (error) {
      fail(error);
    }
  });

await program.parseAsync(process.argv);
