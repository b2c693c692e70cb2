import { SpanStatusCode } from '@opentelemetry/api';
import type { Policy } from '../../core/policy.js';
import type { Store, StoreAnswer, StoreApplyOptions, StoreRequest } from '../../stores/store.js';
import type { ServiceTracing } from './service-tracing.js';

/**
 * A store whose every call is a span (`spanName`, e.g. upstream's `Redis Pipeline
 * Execution`), a child of the check that made it; everything else is the inner store's.
 */
export class TracedStore implements Store {
  constructor(
    private readonly inner: Store,
    private readonly tracing: ServiceTracing,
    private readonly spanName: string,
  ) {}

  #span(batch: readonly StoreRequest[]) {
    return this.tracing.storeSpan(this.spanName, { 'pipeline length': batch.length });
  }

  /** The inner store's answer, as it gives it: an in-process answer stays one. */
  apply(batch: readonly StoreRequest[], options: StoreApplyOptions): StoreAnswer {
    const span = this.#span(batch);
    let answer: StoreAnswer;
    try {
      answer = this.inner.apply(batch, options);
    } catch (error) {
      span.setStatus({ code: SpanStatusCode.ERROR, message: String(error) });
      span.end();
      throw error;
    }
    if (!(answer instanceof Promise)) {
      if (answer.some((r) => !r.ok)) span.setStatus({ code: SpanStatusCode.ERROR });
      span.end();
      return answer;
    }
    return answer.then(
      (results) => {
        if (results.some((r) => !r.ok)) span.setStatus({ code: SpanStatusCode.ERROR });
        span.end();
        return results;
      },
      (error: unknown) => {
        span.setStatus({ code: SpanStatusCode.ERROR, message: String(error) });
        span.end();
        throw error;
      },
    );
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
