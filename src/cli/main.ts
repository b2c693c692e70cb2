#!/usr/bin/env node
import { readFileSync } from 'node:fs';
import { readFile, stat } from 'node:fs/promises';
import { Command, InvalidArgumentError, Option } from 'commander';
import { formatEnvoyConfigError, loadEnvoyConfigPath } from '../config/envoy/index.js';
import { loadPolicyFile } from '../config/load.js';
import { formatIssue } from '../core/errors.js';
import { fsProblem } from '../config/read-file.js';
import { createLimiter } from '../local/create-limiter.js';
import { formatBounds, policyBounds, type PolicyBounds } from '../local/bounds.js';
import { algorithmOf } from '../algorithms/index.js';
import {
  defaultElectionTtlMs,
  leaseFailureSections,
  partitionBoundSection,
} from '../quota/bounds.js';
import { MemoryStore } from '../stores/memory/memory-store.js';
import { pino } from 'pino';
import {
  MAX_STORE_TIMEOUT_MS,
  readServiceSettings,
  readLeaseTlsFiles,
  readSetting,
  type FlagValue,
  type ServiceSettings,
  type SettingKey,
  type XdsSettings,
} from '../service/env-settings.js';
import { capacityPlan } from '../capacity/capacity-plan.js';
import { startService, type ServeOptions } from '../service/main.js';
import { readXdsTlsFiles } from '../service/xds/xds-tls-files.js';
import { parseDescriptorArgs } from './descriptor-args.js';
import { planText } from './plan-text.js';
import { errorText, exitCodeOf } from './error-text.js';
import { addControllerCommand } from './controller-command.js';
import { addSimulateCommand } from './simulate-command.js';
import { positiveNumber, wholeNumber } from './option-values.js';

function fail(error: unknown): never {
  process.stderr.write(errorText(error));
  process.exit(exitCodeOf(error));
}

// dist/cli/main.js (and src/cli/main.ts) sit two levels under the package root.
const { version } = JSON.parse(
  readFileSync(new URL('../../package.json', import.meta.url), 'utf8'),
) as { version: string };

const program = new Command()
  .name('sluice')
  .description('Sluice: a distributed rate limiter. See docs/ for the full guide.')
  .version(version, '-V, --version', 'print the version')
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
  .option('--port <n>', 'HTTP port, 0-65535, 0 for any free one (env PORT; default 8080)')
  .option('--grpc-port <n>', 'gRPC port, 0-65535 (env GRPC_PORT; default 8081)')
  .option('--host <addr>', 'HTTP bind address (env HOST; default 0.0.0.0)')
  .option('--grpc-host <addr>', 'gRPC bind address (env GRPC_HOST; default 0.0.0.0)')
  .option(
    '--redis <url>',
    'Redis host:port or redis:// URL (env REDIS_URL; REDIS_AUTH, REDIS_TYPE, for Sentinel REDIS_SENTINEL_AUTH); default: the embedded memory store',
  )
  .option(
    '--redis-cluster <host:port,...>',
    'Redis Cluster seed nodes, comma-separated (or env REDIS_TYPE=cluster with REDIS_URL as the list; REDIS_AUTH applies)',
  )
  .option(
    '--store-timeout <ms>',
    `store deadline for envoy rules, 1-${MAX_STORE_TIMEOUT_MS} ms (env STORE_TIMEOUT_MS; default 100)`,
  )
  .option(
    '--max-descriptors <n>',
    'most descriptors in one request (env SLUICE_MAX_DESCRIPTORS; default 64)',
  )
  .option(
    '--max-descriptor-entries <n>',
    'most entries in one descriptor (env SLUICE_MAX_DESCRIPTOR_ENTRIES; default 32)',
  )
  .option(
    '--max-descriptor-key-length <n>',
    'longest entry key (env SLUICE_MAX_DESCRIPTOR_KEY_LENGTH; default 256)',
  )
  .option(
    '--max-descriptor-value-length <n>',
    'longest entry value (env SLUICE_MAX_DESCRIPTOR_VALUE_LENGTH; default 1024)',
  )
  .option(
    '--http-headers-timeout <ms>',
    'time a client has to send its request headers, then 408 (env SLUICE_HTTP_HEADERS_TIMEOUT_MS; default 10000)',
  )
  .option(
    '--http-request-timeout <ms>',
    'time a client has to send a whole request, then 408 (env SLUICE_HTTP_REQUEST_TIMEOUT_MS; default 30000)',
  )
  .option(
    '--http-keep-alive-timeout <ms>',
    'how long an idle keep-alive connection stays open (env SLUICE_HTTP_KEEP_ALIVE_TIMEOUT_MS; default 5000)',
  )
  .option(
    '--lease-controllers <host:port,...>',
    'take quota leases from these `sluice controller`s, tried in turn (env SLUICE_LEASE_CONTROLLERS)',
  )
  .option(
    '--lease-policies <name,...>',
    'the rules or policies decided by a lease, by public name (env SLUICE_LEASE_POLICIES)',
  )
  .option(
    '--lease-domain <domain>',
    "the controller's --domain (env SLUICE_LEASE_DOMAIN; default sluice)",
  )
  .option(
    '--lease-agent <name>',
    'this instance among the agents (env SLUICE_LEASE_AGENT; default <hostname>-<pid>-<random>, new at each start)',
  )
  .option(
    '--lease-token-file <file>',
    "a file holding this instance's bearer token for the controllers, read at each connect (env SLUICE_LEASE_TOKEN_FILE)",
  )
  .option(
    '--lease-refresh <ms>',
    "report period and lease window, the controller's --refresh-ms (env SLUICE_LEASE_REFRESH_MS; default 1000)",
  )
  .option(
    '--lease-ttl <ms>',
    "the longest a lease is held (env SLUICE_LEASE_TTL_MS; default the controller's TTL)",
  )
  .option(
    '--lease-fallback <deny|store|rate>',
    'without a lease in force: deny, the store, or a static rate per second (env SLUICE_LEASE_FALLBACK; default deny)',
  )
  .action(
    async (o: {
      config?: string;
      policies?: string;
      port?: string;
      grpcPort?: string;
      host?: string;
      grpcHost?: string;
      redis?: string;
      redisCluster?: string;
      storeTimeout?: string;
      maxDescriptors?: string;
      maxDescriptorEntries?: string;
      maxDescriptorKeyLength?: string;
      maxDescriptorValueLength?: string;
      httpHeadersTimeout?: string;
      httpRequestTimeout?: string;
      httpKeepAliveTimeout?: string;
      leaseControllers?: string;
      leasePolicies?: string;
      leaseDomain?: string;
      leaseAgent?: string;
      leaseTokenFile?: string;
      leaseRefresh?: string;
      leaseTtl?: string;
      leaseFallback?: string;
    }) => {
      try {
        // Flags and environment variables go through one validation, before anything
        // else: a bad value stops the start, naming the flag or variable.
        const flags: FlagValue[] = [];
        const flag = (setting: SettingKey, name: string, value: string | undefined): void => {
          if (value !== undefined) flags.push({ setting, flag: name, value });
        };
        flag('port', '--port', o.port);
        flag('grpcPort', '--grpc-port', o.grpcPort);
        flag('host', '--host', o.host);
        flag('grpcHost', '--grpc-host', o.grpcHost);
        flag('redisUrl', '--redis', o.redis);
        flag('redisUrl', '--redis-cluster', o.redisCluster);
        flag('redisType', '--redis-cluster', o.redisCluster === undefined ? undefined : 'cluster');
        flag('storeTimeoutMs', '--store-timeout', o.storeTimeout);
        flag('maxDescriptors', '--max-descriptors', o.maxDescriptors);
        flag('maxDescriptorEntries', '--max-descriptor-entries', o.maxDescriptorEntries);
        flag('maxDescriptorKeyLength', '--max-descriptor-key-length', o.maxDescriptorKeyLength);
        flag(
          'maxDescriptorValueLength',
          '--max-descriptor-value-length',
          o.maxDescriptorValueLength,
        );
        flag('httpHeadersTimeoutMs', '--http-headers-timeout', o.httpHeadersTimeout);
        flag('httpRequestTimeoutMs', '--http-request-timeout', o.httpRequestTimeout);
        flag('httpKeepAliveTimeoutMs', '--http-keep-alive-timeout', o.httpKeepAliveTimeout);
        flag('leaseControllers', '--lease-controllers', o.leaseControllers);
        flag('leasePolicies', '--lease-policies', o.leasePolicies);
        flag('leaseDomain', '--lease-domain', o.leaseDomain);
        flag('leaseAgent', '--lease-agent', o.leaseAgent);
        flag('leaseTokenFile', '--lease-token-file', o.leaseTokenFile);
        flag('leaseRefreshMs', '--lease-refresh', o.leaseRefresh);
        flag('leaseTtlMs', '--lease-ttl', o.leaseTtl);
        flag('leaseFallback', '--lease-fallback', o.leaseFallback);
        const settings = readServiceSettings(env, flags);
        const logger = pino({ name: 'sluice', level: settings.logLevel });
        if (settings.logFormatText)
          logger.warn('LOG_FORMAT=text: Sluice writes JSON logs only; logging JSON');
        const target = settings.redis;
        const running = await startService({
          ...(o.config === undefined ? {} : { envoyConfig: o.config }),
          ...(o.policies === undefined ? {} : { policiesFile: o.policies }),
          ...(target === undefined
            ? {}
            : target.type === 'single'
              ? { redisUrl: target.url }
              : target.type === 'sentinel'
                ? { redisSentinel: target }
                : { redisCluster: target }),
          ...(settings.redisTls === undefined ? {} : { redisTls: settings.redisTls }),
          ...(settings.grpcTls === undefined ? {} : { grpcTls: settings.grpcTls }),
          port: settings.port,
          grpcPort: settings.grpcPort,
          host: settings.host,
          grpcHost: settings.grpcHost,
          storeTimeoutMs: settings.storeTimeoutMs,
          maxDescriptors: settings.maxDescriptors,
          maxDescriptorEntries: settings.maxDescriptorEntries,
          maxDescriptorKeyLength: settings.maxDescriptorKeyLength,
          maxDescriptorValueLength: settings.maxDescriptorValueLength,
          ...(settings.httpHeadersTimeoutMs === undefined
            ? {}
            : { httpHeadersTimeoutMs: settings.httpHeadersTimeoutMs }),
          ...(settings.httpRequestTimeoutMs === undefined
            ? {}
            : { httpRequestTimeoutMs: settings.httpRequestTimeoutMs }),
          ...(settings.httpKeepAliveTimeoutMs === undefined
            ? {}
            : { httpKeepAliveTimeoutMs: settings.httpKeepAliveTimeoutMs }),
          keyPrefix: settings.keyPrefix,
          shadowMode: settings.shadowMode,
          quotaMode: settings.quotaMode,
          mergeDomainConfig: settings.mergeDomainConfig,
          nearLimitRatio: settings.nearLimitRatio,
          localCacheSizeBytes: settings.localCacheSizeBytes,
          ...(settings.responseHeaders === undefined
            ? {}
            : { responseHeaders: settings.responseHeaders }),
          responseDynamicMetadata: settings.responseDynamicMetadata,
          decisionMode: settings.decisionMode,
          decisionLogSampleRate: settings.decisionLogSampleRate,
          ...(settings.xds === undefined ? {} : { xds: xdsOptions(settings.xds) }),
          ...(settings.statsd === undefined ? {} : { statsd: settings.statsd }),
          ...(settings.tracing === undefined ? {} : { tracing: settings.tracing }),
          healthyWithAtLeastOneConfigLoaded: settings.healthyWithAtLeastOneConfigLoaded,
          ...(settings.grpcUds === undefined ? {} : { grpcUds: settings.grpcUds }),
          grpcMaxConnectionAgeMs: settings.grpcMaxConnectionAgeMs,
          grpcMaxConnectionAgeGraceMs: settings.grpcMaxConnectionAgeGraceMs,
          ...(settings.debug === undefined ? {} : { debug: settings.debug }),
          ...(settings.redisPerSecond === undefined
            ? {}
            : { perSecondRedis: settings.redisPerSecond }),
          ...(settings.redisTimeoutMs === undefined
            ? {}
            : { redisTimeoutMs: settings.redisTimeoutMs }),
          ...(settings.leases === undefined ? {} : { leases: leaseOptions(settings.leases) }),
          logger,
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

/** The xDS settings with their TLS files read. */
function xdsOptions(xds: XdsSettings): NonNullable<ServeOptions['xds']> {
  const { tls, ...rest } = xds;
  return tls === undefined ? rest : { ...rest, tls: readXdsTlsFiles(tls) };
}

/** The lease settings with their TLS files read. */
function leaseOptions(
  leases: NonNullable<ServiceSettings['leases']>,
): NonNullable<ServeOptions['leases']> {
  const { tlsFiles, ...rest } = leases;
  return tlsFiles === undefined ? rest : { ...rest, tls: readLeaseTlsFiles(tlsFiles) };
}

/** Which loader a file given to `validate` is meant for. */
type ConfigFormat = 'envoy' | 'sluice';

/**
 * Guesses a file's format from its top-level keys: `policies:` is a Sluice policy file,
 * `domain:` (without `policies:`) is envoyproxy/ratelimit YAML. Read line by line so a
 * file with a syntax error is still sent to the loader that reports it best.
 */
function detectFormat(text: string): ConfigFormat {
  const topKey = (key: string): boolean =>
    new RegExp(`^(["']?)${key}\\1[ \\t]*:`, 'm').test(text) ||
    new RegExp(`^\\s*\\{\\s*"${key}"\\s*:`).test(text);
  if (topKey('policies')) return 'sluice';
  return topKey('domain') ? 'envoy' : 'sluice';
}

/**
 * Validates envoyproxy/ratelimit config like upstream's `config_check` tool: the same
 * progress lines on stdout and `all rate limit configs ok`, or one
 * `error loading rate limit configs: <file>: <message>` line per issue on stderr and
 * exit 1. A directory's `.yaml`/`.yml` files are read in name order, as `serve --config`
 * reads them.
 */
async function validateEnvoy(path: string, merge: boolean): Promise<void> {
  const out = (line: string): boolean => process.stdout.write(`${line}\n`);
  out('checking rate limit configs...');
  try {
    const config = await loadEnvoyConfigPath(path, {
      mergeDomainConfig: merge,
      onDirectory: (dir) => out(`loading config directory: ${dir}`),
      onFile: (file) => out(`opening config file: ${file}`),
    });
    for (const w of config.warnings) process.stderr.write(`warning: ${formatIssue(w)}\n`);
  } catch (error) {
    process.stderr.write(`${formatEnvoyConfigError(error)}\n`);
    process.exit(exitCodeOf(error));
  }
  out('all rate limit configs ok');
}

// Upstream's config_check flags are Go-style (`-config_dir DIR`, `-config_dir=DIR`);
// accept them as spellings of the long options below.
const GO_FLAGS: Readonly<Record<string, string>> = {
  config_dir: '--config-dir',
  merge_domain_configs: '--merge-domain-configs',
};
const argv = process.argv.map((a) => {
  const m = /^--?(config_dir|merge_domain_configs)(=.*)?$/.exec(a);
  return m ? `${GO_FLAGS[m[1]!]}${m[2] ?? ''}` : a;
});

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
  .option('--rps <r>', 'requests per second to one key across the fleet', (v: string): number => {
    const n = Number(v);
    if (!Number.isFinite(n) || n <= 0) throw new InvalidArgumentError('--rps must be a number > 0');
    return n;
  })
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
          throw new InvalidArgumentError(`--cut-off must be at most --instances (${o.instances})`);
        const set = await loadPolicyFile(o.policies);
        const all = set.policies.map((p): PolicyBounds => {
          const b = policyBounds(p, o.instances, o.rps);
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

program
  .command('validate')
  .description(
    'Validate a Sluice policy file, or envoyproxy/ratelimit config (a directory, or a file with a top-level domain:); print every problem and exit 1 when there is one',
  )
  .argument('[path]', 'policy file (YAML or JSON), or envoyproxy/ratelimit YAML file or directory')
  .option('--config-dir <dir>', 'envoyproxy/ratelimit config directory (upstream -config_dir)')
  .option(
    '--merge-domain-configs',
    'let several files configure one domain (upstream -merge_domain_configs; env MERGE_DOMAIN_CONFIG)',
  )
  .addOption(
    new Option('--format <format>', 'skip detection: envoy or sluice').choices(['envoy', 'sluice']),
  )
  .action(
    async (
      arg: string | undefined,
      o: { configDir?: string; mergeDomainConfigs?: boolean; format?: ConfigFormat },
    ) => {
      try {
        if (arg !== undefined && o.configDir !== undefined)
          throw new InvalidArgumentError('give a path or --config-dir, not both');
        const path = arg ?? o.configDir;
        if (path === undefined) throw new InvalidArgumentError('missing path to validate');
        const merge = o.mergeDomainConfigs ?? readSetting('mergeDomainConfig', env);
        let isDir = false;
        let statError: unknown;
        try {
          isDir = (await stat(path)).isDirectory();
        } catch (e) {
          statError = e; // the loader reports it, naming the path and the problem
        }
        let format = o.format;
        if (o.configDir !== undefined || isDir) format ??= 'envoy';
        if (format === undefined) {
          let text = '';
          try {
            text = await readFile(path, 'utf8');
          } catch {
            // The Sluice loader reports the read error with its code.
          }
          format = detectFormat(text);
        }
        if (format === 'envoy') {
          if (o.configDir !== undefined && !isDir) {
            const problem = statError === undefined ? 'not a directory' : fsProblem(statError);
            process.stderr.write(`error opening directory ${path}: ${problem}\n`);
            process.exit(1);
          }
          await validateEnvoy(path, merge);
          return;
        }
        const set = await loadPolicyFile(path);
        process.stdout.write(
          `${path}: ok (${set.policies.length} ${set.policies.length === 1 ? 'policy' : 'policies'})\n`,
        );
      } catch (error) {
        if (error instanceof InvalidArgumentError) {
          process.stderr.write(`sluice: ${error.message}\n`);
          process.exit(2);
        }
        fail(error);
      }
    },
  );

addSimulateCommand(program, fail);
addControllerCommand(program, fail);

await program.parseAsync(argv);
