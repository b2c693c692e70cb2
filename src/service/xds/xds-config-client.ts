import * as grpc from '@grpc/grpc-js';
import type { Logger } from 'pino';
import type { EnvoyConfig } from '../../config/envoy/envoy-config.js';
import { configFromResources } from './rate-limit-config-resource.js';
import {
  ADS_SERVICE,
  RATE_LIMIT_CONFIG_TYPE_URL,
  type WireDiscoveryRequest,
  type WireDiscoveryResponse,
  type WireNode,
} from './xds-protos.js';

/** TLS to the management server (`CONFIG_GRPC_XDS_SERVER_USE_TLS` and the files it names). */
export interface XdsTlsOptions {
  /** CA certificates (PEM) that sign the server's; absent: the system's roots. */
  readonly caCert?: Buffer;
  /** Client certificate and key (PEM), for mTLS; both or neither. */
  readonly clientCert?: Buffer;
  readonly clientKey?: Buffer;
  /** The name the server's certificate must carry, when not the URL's host. */
  readonly serverName?: string;
}

/** How reconnection waits: doubling from `initialMs` up to `maxMs`. */
export interface XdsBackoff {
  readonly initialMs: number;
  readonly maxMs: number;
  /** With `jitter`, each wait is spread by ± this fraction (0-1). */
  readonly randomFactor: number;
  readonly jitter: boolean;
}

/** Where and as whom the service subscribes (upstream's `CONFIG_GRPC_XDS_*` settings). */
export interface XdsOptions {
  /** The management server, a gRPC target (`host:port`). */
  readonly serverUrl: string;
  readonly nodeId: string;
  /** String fields of the node's metadata. */
  readonly nodeMetadata: Readonly<Record<string, string>>;
  /** Metadata (headers) sent on the stream. */
  readonly headers: Readonly<Record<string, string>>;
  /** Absent: plaintext. */
  readonly tls?: XdsTlsOptions;
  readonly backoff: XdsBackoff;
  /** Largest response accepted, in bytes; 0 keeps gRPC's default (4 MiB). */
  readonly maxMessageBytes: number;
}

export interface XdsConfigClientOptions extends XdsOptions {
  readonly mergeDomainConfig: boolean;
  /** Applies an accepted config; called before the ACK is sent. */
  readonly onConfig: (config: EnvoyConfig, version: string) => void;
  /** Told of a rejected config; the NACK carries `error.message`. */
  readonly onRejected: (error: Error, version: string) => void;
  readonly log: Logger;
  /** @default Math.random */
  readonly random?: () => number;
}

/** `google.rpc.Code.INVALID_ARGUMENT`, the code a NACK's error_detail carries. */
const INVALID_ARGUMENT = 3;

/**
 * Subscribes to the `RateLimitConfig` resources over ADS, state of the world, as
 * upstream does: one `StreamAggregatedResources` stream, the node on every request, no
 * resource names (all of them). Every response is validated whole: a good one is
 * applied and ACKed with its version and nonce; a bad one is NACKed with the previous
 * version and its message in `error_detail`, and the previous config keeps serving. A
 * broken or ended stream is opened again after a backoff, starting from the last
 * accepted version.
 */
export class XdsConfigClient {
  readonly #o: XdsConfigClientOptions;
  readonly #client: grpc.Client;
  readonly #node: WireNode;
  #version = '';
  #attempt = 0;
  #call: grpc.ClientDuplexStream<WireDiscoveryRequest, WireDiscoveryResponse> | undefined;
  #timer: NodeJS.Timeout | undefined;
  #closed = false;
  #firstResolve!: () => void;
  /** Resolves when the first config has been accepted. */
  readonly firstConfig = new Promise<void>((resolve) => (this.#firstResolve = resolve));

  constructor(options: XdsConfigClientOptions) {
    this.#o = options;
    const tls = options.tls;
    const credentials =
      tls === undefined
        ? grpc.credentials.createInsecure()
        : grpc.credentials.createSsl(
            tls.caCert ?? null,
            tls.clientKey ?? null,
            tls.clientCert ?? null,
          );
    this.#client = new grpc.Client(options.serverUrl, credentials, {
      ...(tls?.serverName === undefined
        ? {}
        : {
            'grpc.ssl_target_name_override': tls.serverName,
            'grpc.default_authority': tls.serverName,
          }),
      ...(options.maxMessageBytes > 0
        ? { 'grpc.max_receive_message_length': options.maxMessageBytes }
        : {}),
    });
    this.#node = {
      id: options.nodeId,
      metadata: {
        fields: Object.fromEntries(
          Object.entries(options.nodeMetadata).map(([k, v]) => [k, { stringValue: v }]),
        ),
      },
    };
  }

  /** Opens the stream; reconnects by itself until {@link close}. */
  start(): void {
    this.#o.log.info({ server: this.#o.serverUrl }, 'subscribing to rate limit configs over xDS');
    this.#open();
  }

  /** The version of the config serving now ('' before the first). */
  get version(): string {
    return this.#version;
  }

  close(): void {
    this.#closed = true;
    clearTimeout(this.#timer);
    this.#call?.cancel();
    this.#client.close();
  }

  #request(nonce: string, error?: string): WireDiscoveryRequest {
    return {
      versionInfo: this.#version,
      node: this.#node,
      resourceNames: [],
      typeUrl: RATE_LIMIT_CONFIG_TYPE_URL,
      responseNonce: nonce,
      errorDetail: error === undefined ? null : { code: INVALID_ARGUMENT, message: error },
    };
  }

  #open(): void {
    if (this.#closed) return;
    const method = ADS_SERVICE.StreamAggregatedResources;
    const metadata = new grpc.Metadata();
    for (const [k, v] of Object.entries(this.#o.headers)) metadata.set(k, v);
    const call = this.#client.makeBidiStreamRequest(
      method.path,
      method.requestSerialize,
      method.responseDeserialize,
      metadata,
    );
    this.#call = call;
    let ended = false;
    const retry = (reason: string): void => {
      if (ended) return;
      ended = true;
      call.cancel();
      if (this.#closed) return;
      const delayMs = this.#delayMs();
      this.#attempt += 1;
      this.#o.log.warn(
        { server: this.#o.serverUrl, reason, retryInMs: Math.round(delayMs) },
        'xDS stream lost; reconnecting',
      );
      this.#timer = setTimeout(() => this.#open(), delayMs);
    };
    call.on('data', (response: WireDiscoveryResponse) => {
      this.#attempt = 0;
      call.write(this.#answer(response));
    });
    call.on('error', (error: Error) => retry(error.message));
    call.on('end', () => retry('the server ended the stream'));
    call.write(this.#request(''));
  }

  /** Validates and applies one response; returns its ACK or NACK. */
  #answer(response: WireDiscoveryResponse): WireDiscoveryRequest {
    let config: EnvoyConfig;
    try {
      config = configFromResources(response.resources, {
        mergeDomainConfig: this.#o.mergeDomainConfig,
      });
    } catch (e) {
      const error = e instanceof Error ? e : new Error(String(e));
      this.#o.onRejected(error, response.versionInfo);
      return this.#request(response.nonce, error.message);
    }
    this.#o.onConfig(config, response.versionInfo);
    this.#version = response.versionInfo;
    this.#firstResolve();
    return this.#request(response.nonce);
  }

  #delayMs(): number {
    const b = this.#o.backoff;
    const base = Math.min(b.maxMs, b.initialMs * 2 ** Math.min(this.#attempt, 30));
    if (!b.jitter) return base;
    const spread = b.randomFactor * (2 * (this.#o.random ?? Math.random)() - 1);
    return Math.max(0, base * (1 + spread));
  }
}
