import { InvalidArgumentError, Option, type Command } from 'commander';
import { pino } from 'pino';
import { ControllerMetrics } from '../metrics/controller-metrics.js';
import { startControllerHttp } from '../quota/controller-http.js';
import { startQuotaController } from '../quota/controller-process.js';
import type { QuotaBudget } from '../quota/lease.js';
import type { RlqsStrategyKind } from '../quota/rlqs/mapping.js';
import { CAP_FLAGS, DEFAULT_PEER_CAPS, type PeerCaps } from '../quota/rlqs/peer-caps.js';
import { checkControllerFlags } from './controller-settings.js';
import { agentAuthFromFlags } from './controller-auth.js';
import { waitForRedis } from '../service/redis-wait.js';
import { wholeNumber } from './option-values.js';
import { readFileSync } from 'node:fs';
import { TermSigner } from '../quota/rlqs/term-signature.js';

/** `k=v[,k=v…]@rate`: a BucketId's pairs (in any order) and its budget per second. */
function budget(v: string, previous: QuotaBudget[] = []): QuotaBudget[] {
  const at = v.lastIndexOf('@');
  const rate = Number(v.slice(at + 1));
  const pairs = v.slice(0, Math.max(0, at)).split(',');
  if (at <= 0 || !(rate > 0) || pairs.some((p) => !/^[^=]+=[^=]+$/.test(p)))
    throw new InvalidArgumentError(
      `--budget must look like name=api@1000 (BucketId pairs, then @ and units per second), got "${v}"`,
    );
  const bucket = pairs
    .map((p) => p.split('='))
    .sort((a, b) => (a[0]! < b[0]! ? -1 : 1))
    .map(([k, val]) => `${k}=${val}`)
    .join(',');
  return [...previous, { bucket, ratePerSecond: rate }];
}

/** What each peer cap's flag says (docs/quota-leases.md, "Caps"). */
const CAP_HELP: Readonly<Record<keyof PeerCaps, string>> = {
  maxAgents: 'agents of the domain at once (streams plus agents in the ledger)',
  maxBucketsPerMessage: 'buckets in one RLQS message',
  maxBucketsPerAgent: 'distinct buckets one stream may report',
  maxBucketPairs: 'pairs in one BucketId',
  maxBucketKeyBytes: 'longest BucketId key, in UTF-8 bytes',
  maxBucketValueBytes: 'longest BucketId value, in UTF-8 bytes',
  maxReportsPerSecond: 'RLQS messages one stream may send per second',
};

/** `sluice controller`: the quota lease controller, serving RLQS (docs/quota-leases.md). */
export function addControllerCommand(program: Command, fail: (error: unknown) => never): void {
  const command = program
    .command('controller')
    .description(
      'Run a quota lease controller: elect a leader through Redis, share each budget by demand, serve envoy.service.rate_limit_quota.v3 (RLQS)',
    )
    .requiredOption('--redis <url>', 'Redis holding the leader lease, fencing token and state')
    .requiredOption('--id <name>', "this controller's name among its peers")
    .requiredOption('--domain <domain>', 'the RLQS domain served')
    .requiredOption(
      '--budget <bucket@rate>',
      'a bucket and its budget, e.g. name=api@1000 (repeatable)',
      budget,
    )
    .option('--port <n>', 'gRPC port', wholeNumber('--port', 0), 18081)
    .option('--host <addr>', 'address to listen on', '127.0.0.1')
    .option(
      '--http-port <n>',
      'HTTP port of /healthcheck, /ready and /metrics',
      wholeNumber('--http-port', 0),
      18080,
    )
    .option('--refresh-ms <ms>', 'report and round period', wholeNumber('--refresh-ms', 1), 1_000)
    .option(
      '--lease-ttl-ms <ms>',
      'lease TTL (default 3 × refresh)',
      wholeNumber('--lease-ttl-ms', 1),
    )
    .option(
      '--election-ttl-ms <ms>',
      'leader term without renewal (default lease TTL / 3)',
      wholeNumber('--election-ttl-ms', 1),
    )
    .option('--prefix <prefix>', 'Redis key prefix', 'sluice-quota')
    .addOption(
      new Option('--strategy <kind>', 'RLQS strategy sent')
        .choices(['token_bucket', 'requests_per_time_unit'])
        .default('token_bucket'),
    )
    .option('--tls-cert <file>', 'TLS certificate of the RLQS port (PEM)')
    .option('--tls-key <file>', 'its private key (PEM)')
    .option('--client-ca <file>', "CA that signs agents' client certificates (mTLS)")
    .option(
      '--agent-certs-file <file>',
      'YAML list of {identity: URI:…|DNS:…, agents: [patterns], domains: [patterns]} for mTLS agents',
    )
    .option(
      '--agent-tokens-file <file>',
      'YAML list of {token, agents: [patterns], domains: [patterns]}: bearer tokens agents may present',
    )
    .option(
      '--term-secret-file <file>',
      'a secret (16 bytes or more) every controller of the domain shares: terms are signed, and a seen term must be',
    )
    .option(
      '--insecure-agents',
      'accept unauthenticated agents on an address other than loopback',
      false,
    );
  for (const cap of Object.keys(CAP_FLAGS) as (keyof PeerCaps)[]) {
    command.option(
      `${CAP_FLAGS[cap]} <n>`,
      CAP_HELP[cap],
      wholeNumber(CAP_FLAGS[cap], 1),
      DEFAULT_PEER_CAPS[cap],
    );
  }
  command.action(
    async (
      o: {
        redis: string;
        id: string;
        domain: string;
        budget: QuotaBudget[];
        port: number;
        httpPort: number;
        host: string;
        refreshMs: number;
        leaseTtlMs?: number;
        electionTtlMs?: number;
        prefix: string;
        strategy: RlqsStrategyKind;
        tlsCert?: string;
        tlsKey?: string;
        clientCa?: string;
        agentCertsFile?: string;
        agentTokensFile?: string;
        termSecretFile?: string;
        insecureAgents: boolean;
      } & PeerCaps,
    ) => {
      try {
        const caps = Object.fromEntries(
          (Object.keys(CAP_FLAGS) as (keyof PeerCaps)[]).map((k) => [k, o[k]]),
        ) as unknown as PeerCaps;
        checkControllerFlags({ ...o, caps });
        const agents = agentAuthFromFlags(o);
        const termSigner =
          o.termSecretFile === undefined
            ? undefined
            : new TermSigner(Buffer.from(readFileSync(o.termSecretFile, 'utf8').trim()));
        // JSON lines as `serve` writes them; each event keeps its fields, `msg` is its name.
        const logger = pino({ name: 'sluice-controller' });
        const log = (e: Record<string, unknown>) => logger.info(e, String(e['event']));
        // Read at each scrape, so only once the controller below exists.
        const metrics = new ControllerMetrics({ status: () => c.status() });
        const c = await startQuotaController({
          redisUrl: o.redis,
          id: o.id,
          domain: o.domain,
          budgets: o.budget,
          port: o.port,
          host: o.host,
          refreshMs: o.refreshMs,
          prefix: o.prefix,
          strategy: o.strategy,
          caps,
          ...agents,
          ...(termSigner === undefined ? {} : { termSigner }),
          log,
          onRefusal: (reason, count) => metrics.refusal(reason, count),
          onAuthFailure: (reason) => metrics.authFailure(reason),
          onDuplicateAgent: () => metrics.duplicateAgent(),
          onSettingsMismatch: (setting) => metrics.settingsMismatch(setting),
          ...(o.leaseTtlMs === undefined ? {} : { leaseTtlMs: o.leaseTtlMs }),
          ...(o.electionTtlMs === undefined ? {} : { electionTtlMs: o.electionTtlMs }),
        });
        const http = await startControllerHttp({
          host: o.host,
          port: o.httpPort,
          status: () => c.status(),
          metrics: () => metrics.text(),
        });
        // The ports are open whether Redis is there or not; `/ready` says 503 until it is.
        const wait = waitForRedis(c, { log: logger, onReady: () => undefined });
        log({ event: 'listening', id: o.id, port: c.port, httpPort: http.port });
        process.once('SIGTERM', () => {
          wait.stop();
          void Promise.all([c.close(), http.close()]).then(() => process.exit(0));
        });
      } catch (error) {
        fail(error);
      }
    },
  );
}
