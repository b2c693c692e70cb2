/**
 * A minimal xDS management server for tests: @grpc/grpc-js serving
 * `envoy.service.discovery.v3.AggregatedDiscoveryService` from the official protos in
 * src/protocol/proto/upstream. It records every DiscoveryRequest, and pushes
 * DiscoveryResponses of RateLimitConfig resources (or raw Any resources) on the open
 * stream, answering each push with the request that carries its nonce (the ACK or NACK).
 */
import * as grpc from '@grpc/grpc-js';
import {
  ADS_SERVICE,
  RATE_LIMIT_CONFIG,
  RATE_LIMIT_CONFIG_TYPE_URL,
  type WireAny,
  type WireDiscoveryRequest,
  type WireDiscoveryResponse,
  type WireRateLimitConfig,
} from '../../src/service/xds/xds-protos.js';

type Stream = grpc.ServerDuplexStream<WireDiscoveryRequest, WireDiscoveryResponse>;

/** A RateLimitConfig message, fields not given left at their defaults. */
export interface RateLimitConfigInput {
  readonly name?: string;
  readonly domain?: string;
  readonly descriptors?: readonly unknown[];
}

export class XdsManagementServer {
  /** Every request received, over every stream, in order. */
  readonly requests: WireDiscoveryRequest[] = [];
  /** The metadata (headers) each stream was opened with. */
  readonly streamHeaders: grpc.Metadata[] = [];
  #stream: Stream | undefined;
  #nonce = 0;
  #waiters: {
    test: (r: WireDiscoveryRequest) => boolean;
    resolve: (r: WireDiscoveryRequest) => void;
  }[] = [];

  readonly #server = new grpc.Server();
  #port = 0;

  private constructor() {
    this.#server.addService(ADS_SERVICE, {
      StreamAggregatedResources: (stream: Stream) => this.#open(stream),
      DeltaAggregatedResources: (stream: grpc.ServerDuplexStream<unknown, unknown>) =>
        stream.emit('error', { code: grpc.status.UNIMPLEMENTED, details: 'SotW only' }),
    });
  }

  /** The port it listens on. */
  get port(): number {
    return this.#port;
  }

  /** Starts on 127.0.0.1:`port` (0: any free port), plaintext unless `credentials`. */
  static async start(
    port = 0,
    credentials: grpc.ServerCredentials = grpc.ServerCredentials.createInsecure(),
  ): Promise<XdsManagementServer> {
    const self = new XdsManagementServer();
    self.#port = await new Promise<number>((resolve, reject) =>
      self.#server.bindAsync(`127.0.0.1:${port}`, credentials, (e, p) =>
        e === null ? resolve(p) : reject(e),
      ),
    );
    return self;
  }

  #open(stream: Stream): void {
    this.#stream = stream;
    this.streamHeaders.push(stream.metadata);
    stream.on('data', (r: WireDiscoveryRequest) => {
      this.requests.push(r);
      this.#waiters = this.#waiters.filter((w) => {
        if (!w.test(r)) return true;
        w.resolve(r);
        return false;
      });
    });
    stream.on('end', () => stream.end());
    stream.on('error', () => undefined);
  }

  /** The next request (received from now on) that `test` accepts. */
  next(test: (r: WireDiscoveryRequest) => boolean = () => true): Promise<WireDiscoveryRequest> {
    return new Promise((resolve) => this.#waiters.push({ test, resolve }));
  }

  /**
   * Sends a response of `configs` (encoded as RateLimitConfig resources) or of raw
   * resources, at `version`, on the open stream; resolves with the ACK or NACK.
   */
  push(
    version: string,
    configs: readonly (RateLimitConfigInput | WireAny)[],
  ): Promise<WireDiscoveryRequest> {
    const stream = this.#stream;
    if (stream === undefined) throw new Error('no stream is open');
    const nonce = `n${++this.#nonce}`;
    const answer = this.next((r) => r.responseNonce === nonce);
    const resources = configs.map((c) =>
      'type_url' in c && Buffer.isBuffer(c['value'])
        ? (c as WireAny)
        : {
            type_url: RATE_LIMIT_CONFIG_TYPE_URL,
            value: RATE_LIMIT_CONFIG.serialize(c as WireRateLimitConfig),
          },
    );
    stream.write({ versionInfo: version, resources, typeUrl: RATE_LIMIT_CONFIG_TYPE_URL, nonce });
    return answer;
  }

  /** Stops at once, breaking the open stream. */
  stop(): void {
    this.#server.forceShutdown();
  }
}
