import { SpanStatusCode } from '@opentelemetry/api';
import type { Policy } from '../../core/policy.js';
import type { Store, StoreApplyOptions, StoreRequest, StoreResult } from '../../stores/store.js';
import type { ServiceTracing } from './service-tracing.js';

/**
 * A store whose every call is a span (`spanName`, e.g. upstream's `Redis Pipeline
 * Execution`), a child of the check that made it; everything else is the inner store's.
 */
export class TracedStore implements Store {
  readonly applySync?: NonNullable<Store['applySync']>;

  constructor(
    private readonly inner: Store,
    private readonly tracing: ServiceTracing,
    private readonly spanName: string,
  ) {
    const sync = inner.applySync?.bind(inner);
    if (sync !== undefined) {
      this.applySync = (batch, options) => {
        const span = this.#span(batch);
        try {
          return sync(batch, options);
        } finally {
          span.end();
        }
      };
    }
  }

  #span(batch: readonly StoreRequest[]) {
    return this.tracing.storeSpan(this.spanName, { 'pipeline length': batch.length });
  }

  async apply(
    batch: readonly StoreRequest[],
    options: StoreApplyOptions,
  ): Promise<readonly StoreResult[]> {
    const span = this.#span(batch);
    try {
      const results = await this.inner.apply(batch, options);
      if (results.some((r) => !r.ok)) span.setStatus({ code: SpanStatusCode.ERROR });
      return results;
    } catch (error) {
      span.setStatus({ code: SpanStatusCode.ERROR, message: String(error) });
      throw error;
    } finally {
      span.end();
    }
  }

  close(): Promise<void> {
    return this.inner.close();
  }

  checkPolicy(policy: Policy): void {
    this.inner.checkPolicy?.(policy);
  }

  checkPolicies(policies: readonly Policy[]): void {
    this.inner.checkPolicies?.(policies);
  }
}
