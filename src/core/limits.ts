/**
 * Input limits, with safe defaults. A plane may override any of them (see `Limits`); exceeding
 * one is a 400 or 413 with a message naming the limit.
 */
export interface Limits {
  envelopeBytes: number;
  resultBytes: number;
  frameBytes: number;
  framesPerInvocation: number;
  idLength: number;
  keyLength: number;
  queueLength: number;
  /** Longest a claim may wait for work. */
  maxClaimWaitMs: number;
  /** Longest a result or journal read may block. */
  maxResultWaitMs: number;
  /** Most items in one batch request. */
  maxBatch: number;
  /** Deepest nesting of a free-form JSON value (a frame's meta, a nack's error object). */
  jsonDepth: number;
  /** Furthest ahead a delay, a run_at, a backoff or a TTL may reach. */
  maxDelayMs: number;
  defaultLeaseMs: number;
  maxLeaseMs: number;
  defaultMaxAttempts: number;
  /** How long a finished job is kept (then purged with its frames) on a queue that sets none. */
  defaultRetentionMs: number;
}

/** The most queues one overview request may name (`GET /queues?queue=a&queue=b`); a client names more in several. */
export const MAX_NAMED_QUEUES = 100;
/** The most queue names one page of names answers (`GET /queue-names`): one D1 read, no queue object asked. */
export const MAX_QUEUE_NAMES = 1000;

export const DEFAULT_LIMITS: Readonly<Limits> = Object.freeze({
  envelopeBytes: 1 << 20,
  resultBytes: 1 << 20,
  frameBytes: 256 << 10,
  framesPerInvocation: 100_000,
  idLength: 200,
  keyLength: 200,
  queueLength: 128,
  maxClaimWaitMs: 60_000,
  maxResultWaitMs: 300_000,
  maxBatch: 1000,
  jsonDepth: 64,
  maxDelayMs: 365 * 86_400_000,
  defaultLeaseMs: 30_000,
  maxLeaseMs: 24 * 3600_000,
  defaultMaxAttempts: 3,
  defaultRetentionMs: 7 * 86_400_000,
});

/** The longest a claim that carries acks waits for work, so their answers are not held back (ackAndClaim). */
export const ACKS_WAIT_MS = 25;
/**
 * How long a claim carrying acks waits for the next submit to hand it rows, on a queue its worker
 * keeps up with, before it looks (work.ts ackAndClaim).
 */
export const GATHER_MS = 5;
