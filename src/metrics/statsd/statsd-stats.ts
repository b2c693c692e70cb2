import { StatsD } from 'hot-shots';
import { DEFAULT_NEAR_LIMIT_RATIO, RULE_OUTCOMES, ruleHits, type RuleUsage } from '../rule-hits.js';
import {
  SERVICE_STAT_NAMES,
  cleanTags,
  domainNotFoundStatName,
  nameWithTags,
  ruleStatName,
  serverStatName,
} from './stat-name.js';

/** Where and how stats are sent (upstream's `USE_STATSD` / `USE_DOG_STATSD` settings). */
export interface StatsdOptions {
  /**
   * `statsd`: plain statsd over TCP, tags written into the name (`.__key=value`), as
   * upstream's gostats TCP sink. `dogstatsd`: DogStatsD over UDP, tags as `|#key:value`,
   * as upstream's datadog sink.
   */
  readonly flavor: 'statsd' | 'dogstatsd';
  readonly host: string;
  readonly port: number;
  /** `EXTRA_TAGS`: added to every stat. */
  readonly extraTags: Readonly<Record<string, string>>;
  /** How often counters are sent, in ms (`STATS_FLUSH_INTERVAL`). */
  readonly flushIntervalMs: number;
  /** The near-limit share for `near_limit` (`NEAR_LIMIT_RATIO`). @default 0.8 */
  readonly nearLimitRatio?: number;
  /** Told of a send failure (the stats are dropped; serving goes on). */
  readonly onError?: (error: Error) => void;
}

/** The stat events the service reports, by upstream's meaning. */
export interface UpstreamStats {
  /**
   * One check against one rule, `statsKey` its stats key (domain first, as upstream's):
   * its hits split as upstream's per-rule counters.
   */
  ruleCheck(statsKey: string, usage: RuleUsage): void;
  /** A request for a domain no config has, counted per descriptor as upstream. */
  domainNotFound(domain: string, descriptors: number): void;
  configLoad(result: 'success' | 'error'): void;
  /** Global shadow mode turned an over-limit answer into OK. */
  globalShadowMode(): void;
  /** A ShouldRateLimit call failed: `store` (upstream's redis_error) or another error. */
  callError(kind: 'store' | 'service'): void;
  /** One gRPC call of `method` (`ShouldRateLimit`) that took `durationMs`. */
  serverCall(method: string, durationMs: number): void;
}

/**
 * Sends upstream's stats to statsd or DogStatsD through hot-shots. Counters add up in
 * memory and go out every `flushIntervalMs` as one delta each (none for a counter that
 * did not move), as gostats flushes; timings go out as they happen.
 */
export class StatsdStats implements UpstreamStats {
  readonly #client: StatsD;
  readonly #counters = new Map<string, number>();
  readonly #timer: NodeJS.Timeout;
  readonly #ratio: number;
  readonly #tags: [string, string][];
  readonly #dog: boolean;

  constructor(options: StatsdOptions) {
    this.#dog = options.flavor === 'dogstatsd';
    this.#ratio = options.nearLimitRatio ?? DEFAULT_NEAR_LIMIT_RATIO;
    this.#tags = cleanTags(options.extraTags);
    const onError = options.onError ?? (() => undefined);
    this.#client = new StatsD({
      host: options.host,
      port: options.port,
      protocol: this.#dog ? 'udp' : 'tcp',
      tcpGracefulErrorHandling: true,
      errorHandler: onError,
      includeDataDogTags: false,
      includeDatadogTelemetry: false,
      // hot-shots batches lines into packets of at most this many bytes.
      maxBufferSize: 1400,
      bufferFlushInterval: 100,
    });
    this.#timer = setInterval(() => this.flush(), options.flushIntervalMs);
    this.#timer.unref();
  }

  #add(name: string, n: number): void {
    if (n > 0) this.#counters.set(name, (this.#counters.get(name) ?? 0) + n);
  }

  #send(name: string, value: number, kind: 'count' | 'timing'): void {
    const tags = this.#tags.map(([k, v]) => `${k}:${v}`);
    const stat = this.#dog ? name : nameWithTags(name, this.#tags);
    if (kind === 'count') this.#client.increment(stat, value, this.#dog ? tags : []);
    else this.#client.timing(stat, value, this.#dog ? tags : []);
  }

  ruleCheck(statsKey: string, usage: RuleUsage): void {
    const split = ruleHits(usage, this.#ratio);
    for (const o of RULE_OUTCOMES) this.#add(ruleStatName(statsKey, o), split[o]);
  }

  domainNotFound(domain: string, descriptors: number): void {
    this.#add(domainNotFoundStatName(domain), descriptors);
  }

  configLoad(result: 'success' | 'error'): void {
    this.#add(
      result === 'success'
        ? SERVICE_STAT_NAMES.configLoadSuccess
        : SERVICE_STAT_NAMES.configLoadError,
      1,
    );
  }

  globalShadowMode(): void {
    this.#add(SERVICE_STAT_NAMES.globalShadowMode, 1);
  }

  callError(kind: 'store' | 'service'): void {
    this.#add(
      kind === 'store' ? SERVICE_STAT_NAMES.redisError : SERVICE_STAT_NAMES.serviceError,
      1,
    );
  }

  serverCall(method: string, durationMs: number): void {
    this.#add(serverStatName(method, 'total_requests'), 1);
    this.#send(serverStatName(method, 'response_time'), Math.round(durationMs), 'timing');
  }

  /** Sends every counter that moved since the last flush. */
  flush(): void {
    for (const [name, value] of this.#counters) this.#send(name, value, 'count');
    this.#counters.clear();
  }

  /** Flushes the counters and closes the connection. */
  close(): Promise<void> {
    clearInterval(this.#timer);
    this.flush();
    return new Promise((resolve) => this.#client.close(() => resolve()));
  }
}
