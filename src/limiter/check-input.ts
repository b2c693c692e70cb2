import type { Policy } from '../core/policy.js';
import { PolicyError } from '../core/errors.js';
import { release, type PreparedItem } from './policy-plan.js';

/** Validating what a check is given: its options, costs and request id, each with a clear `PolicyError`. */

/** The default of a check's options: one shared object, not a new one per check. */
export const NO_OPTIONS: Readonly<Record<string, never>> = Object.freeze({});

/**
 * Validates a check's request id and timeout (the one place), giving the items back when
 * either is invalid. The valid request id, if any.
 */
export function validOptions(
  options: { readonly requestId?: string; readonly timeoutMs?: number },
  items: readonly PreparedItem[],
): string | undefined {
  try {
    const requestId =
      options.requestId === undefined ? undefined : validateRequestId(options.requestId);
    validateTimeout(options.timeoutMs);
    return requestId;
  } catch (error) {
    release(items);
    throw error;
  }
}

export function validateTimeout(timeoutMs: number | undefined): void {
  if (timeoutMs !== undefined && !(timeoutMs > 0)) {
    throw new PolicyError(
      'SLUICE_ERR_TIMEOUT_INVALID',
      `timeoutMs must be a positive number of ms, got ${String(timeoutMs)}`,
    );
  }
}

export function validateCost(cost: unknown): void {
  if (typeof cost !== 'number' || !Number.isSafeInteger(cost) || cost < 0) {
    throw new PolicyError(
      'SLUICE_ERR_COST_INVALID',
      `cost must be a non-negative safe integer, got ${typeof cost === 'number' ? String(cost) : typeof cost}`,
    );
  }
}

export function costExceeds(cost: number, capacity: number, policy: Policy): PolicyError {
  return new PolicyError(
    'SLUICE_ERR_COST_EXCEEDS_CAPACITY',
    `cost ${cost} exceeds the capacity ${capacity} of policy "${policy.name}": it could never be admitted`,
  );
}

export function validateRequestId(id: unknown): string {
  if (typeof id !== 'string' || id.length === 0 || id.length > 128 || !id.isWellFormed()) {
    throw new PolicyError(
      'SLUICE_ERR_REQUEST_ID_INVALID',
      `requestId must be a non-empty, well-formed string of at most 128 characters, got ${typeof id === 'string' ? `${id.length} characters` : typeof id}`,
    );
  }
  return id;
}
