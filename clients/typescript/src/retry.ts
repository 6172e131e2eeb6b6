// SPDX-License-Identifier: Apache-2.0
// The opt-in retry policy (docs/clients.md, "Retries").

import { AtCapacityError, RateLimitedError } from "./errors.js";

/** How refused calls are retried: only `AT_CAPACITY` and `RATE_LIMITED`. */
export interface RetryPolicy {
  /** Attempts in all, the first included (default 4). */
  maxAttempts?: number | undefined;
  /** The base of the exponential backoff, in ms (default 100). */
  baseMs?: number | undefined;
  /** The longest backoff before jitter, in ms (default 2000). */
  capMs?: number | undefined;
}

/** A policy with every field set. */
export type ResolvedRetryPolicy = { [K in keyof RetryPolicy]-?: NonNullable<RetryPolicy[K]> };

export const DEFAULT_RETRY: Readonly<ResolvedRetryPolicy> = Object.freeze({
  maxAttempts: 4,
  baseMs: 100,
  capMs: 2000,
});

/** The policy with its defaults filled in; `undefined`/`false` is no retry. */
export function resolveRetry(
  policy: RetryPolicy | boolean | undefined,
): ResolvedRetryPolicy | undefined {
  if (policy === undefined || policy === false) return undefined;
  const p = policy === true ? {} : policy;
  const r: ResolvedRetryPolicy = {
    maxAttempts: p.maxAttempts ?? DEFAULT_RETRY.maxAttempts,
    baseMs: p.baseMs ?? DEFAULT_RETRY.baseMs,
    capMs: p.capMs ?? DEFAULT_RETRY.capMs,
  };
  for (const [k, v] of Object.entries(r)) {
    if (!Number.isFinite(v) || v < 0) throw new RangeError(`retry.${k} must be a number >= 0`);
  }
  if (!Number.isInteger(r.maxAttempts) || r.maxAttempts < 1) {
    throw new RangeError("retry.maxAttempts must be an integer >= 1");
  }
  return r;
}

/**
 * The sleep before retry `n` (0-based): uniform in [d/2, d] with
 * d = min(capMs, baseMs × 2^n) ("equal jitter").  `random` is in [0, 1).
 */
export function backoffMs(
  policy: ResolvedRetryPolicy,
  n: number,
  random: () => number = Math.random,
): number {
  const d = Math.min(policy.capMs, policy.baseMs * 2 ** n);
  return d / 2 + random() * (d / 2);
}

/** Whether an error may be retried: nothing ran and the refusal is about load. */
export function isRetryable(err: unknown): boolean {
  return err instanceof AtCapacityError || err instanceof RateLimitedError;
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
