import type { ClaimOptions, NackOptions, SubmitOptions } from './types.ts';

/**
 * Refuses options a call does not take. A JavaScript caller has no compiler to say that
 * `handlers` is not `registry` or `delay` is not `delayMs`, and a call that ignored one would do
 * something else than asked (a worker failing every job, a delayed job run at once).
 *
 * `call` is how the call is written (`runWorker(queues, options)`), `known` every option it takes,
 * `meant` what an option it does not take most likely meant.
 */
export function checkOptions<K extends string>(call: string, opts: unknown, known: Record<K, true>, meant: Record<string, K>): void {
  if (opts === null || typeof opts !== 'object' || Array.isArray(opts))
    throw new TypeError(`${call}: options is an object, not ${Array.isArray(opts) ? 'an array' : String(opts)}`);
  // On every submit: a loop that finds nothing allocates nothing.
  let odd: string[] | null = null;
  for (const k in opts) if (!Object.hasOwn(known, k) && Object.hasOwn(opts, k)) (odd ??= []).push(k);
  if (odd)
    throw new TypeError(
      `${call.slice(0, call.indexOf('('))}: no option ${odd.map((k) => (meant[k] ? `${k} (${meant[k]}, perhaps)` : k)).join(', ')}; its options are ${Object.keys(known).join(', ')}`,
    );
}

// The verbs whose options, misspelled and ignored, would do something else than asked: a delay
// or a budget dropped (submit, nack), a claim that does not wait (claim). Python's verbs take
// keywords, which refuse an unknown one by themselves.

const SUBMIT: Record<keyof SubmitOptions, true> = {
  id: true,
  key: true,
  priority: true,
  parent: true,
  delayMs: true,
  runAt: true,
  ttlMs: true,
  expiresAt: true,
  maxAttempts: true,
};
const SUBMIT_MEANT: Record<string, keyof SubmitOptions> = {
  delay: 'delayMs',
  delay_ms: 'delayMs',
  run_at: 'runAt',
  ttl: 'ttlMs',
  ttl_ms: 'ttlMs',
  expires_at: 'expiresAt',
  max_attempts: 'maxAttempts',
  attempts: 'maxAttempts',
  jobId: 'id',
  idempotencyKey: 'key',
};

export function checkSubmitOptions(opts: unknown): void {
  checkOptions('submit(queue, envelope, options)', opts, SUBMIT, SUBMIT_MEANT);
}

const CLAIM: Record<keyof ClaimOptions, true> = { kind: true, temperature: true, waitMs: true, leaseMs: true, signal: true, worker: true };
const CLAIM_MEANT: Record<string, keyof ClaimOptions> = {
  wait: 'waitMs',
  wait_ms: 'waitMs',
  timeout: 'waitMs',
  timeoutMs: 'waitMs',
  lease: 'leaseMs',
  lease_ms: 'leaseMs',
};

export function checkClaimOptions(opts: unknown): void {
  checkOptions('claim(queue, workerId, options)', opts, CLAIM, CLAIM_MEANT);
}

const NACK: Record<keyof NackOptions, true> = { attempt: true, error: true, retry: true, delayMs: true, maxAttempts: true };
const NACK_MEANT: Record<string, keyof NackOptions> = {
  delay: 'delayMs',
  delay_ms: 'delayMs',
  max_attempts: 'maxAttempts',
  message: 'error',
};

export function checkNackOptions(opts: unknown): void {
  checkOptions('nack(id, workerId, options)', opts, NACK, NACK_MEANT);
}
