/**
 * What the gRPC and HTTP transport tests' handlers share: a descriptor key steers the
 * call (`slow` waits until the test releases it, `fail-policy` / `fail-store` /
 * `fail-bug` throw), and every call's context is kept. Each transport test builds its
 * own answers on top.
 */
import { PolicyError, StoreError } from '../../src/core/errors.js';
import type { CallContext } from '../../src/service/grpc/handlers.js';

export function deferred(): { promise: Promise<void>; resolve: () => void } {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
}

export class ScriptedHandlers {
  readonly contexts: CallContext[] = [];
  slowStarted = deferred();
  slowRelease = deferred();

  protected async steer(keys: readonly string[], context: CallContext): Promise<void> {
    this.contexts.push(context);
    if (keys.includes('slow')) {
      this.slowStarted.resolve();
      await this.slowRelease.promise;
    }
    if (keys.includes('fail-policy')) {
      throw new PolicyError('SLUICE_ERR_POLICY_UNKNOWN', 'unknown policy "nope"; loaded: a, b');
    }
    if (keys.includes('fail-store')) {
      throw new StoreError('SLUICE_ERR_STORE_TIMEOUT', 'store did not answer within 20ms');
    }
    if (keys.includes('fail-bug')) throw new Error('secret: redis://user:hunter2@10.0.0.1');
  }
}
