/**
 * What a pusher (push.ts) is given and gives back: its port to the plane, its options and the
 * figures it keeps for the operator view.
 */
import type { Ack } from './push-acks.ts';
import type { Delivered } from './push-wire.ts';
import type { Backoff, Claimed, InvocationError } from './types.ts';

/** The worker id a plane's pusher claims as (the workers list shows it; a delivery names it). */
export const PUSH_WORKER_ID = 'lakeshore-push';

/**
 * The backoff between a push queue's deliveries of a job when its queue sets none: 10 s, 1 min,
 * 6 min, 36 min, then hourly, each ±10 %. A target that is down (a deploy, a cold start, an
 * outage) would otherwise see the job's whole attempt budget in milliseconds, and a recovering one
 * every failed job at once. A queue's own `retry_backoff` (0 for none) and a `Retry-After` take
 * precedence. It applies to every nack of the pusher's worker id: the pusher's, and a receiver's
 * with its delivery token.
 */
export const PUSH_BACKOFF: Backoff = { initialMs: 10_000, factor: 6, maxMs: 3_600_000, jitter: 0.1 };

/** What a nack made of a pushed job: queued again, delayed until `runAt`, or failed. */
export interface Retried {
  state: 'queued' | 'delayed' | 'failed';
  runAt: number | null;
}

/** What a pusher needs of its plane. */
export interface PushPort {
  /** Claims up to `max` jobs for `workerId`, waiting up to `waitMs` for one; `signal` calls the wait off. */
  claim(max: number, leaseMs: number, waitMs: number, signal: AbortSignal): Promise<Claimed[]>;
  /**
   * Acks these attempts in one write: per item, null when acked, or why it was refused (its
   * attempt is no longer held: the lease ran out, or it was cancelled).
   */
  ackMany(items: Ack[]): Promise<(Error | null)[]>;
  /** The acks and the next claim in one write (the claim waits at most a moment for work). */
  ackAndClaim(acks: Ack[], max: number, leaseMs: number, waitMs: number): Promise<{ acks: (Error | null)[]; claimed: Claimed[] }>;
  /**
   * Nacks the attempt: with `retry`, under the queue's budget, after `delayMs` (null: the queue's
   * backoff, else the push backoff). Answers what became of the job: waiting again (and when it is
   * due), or failed.
   */
  nack(c: Claimed, error: InvocationError, retry: boolean, delayMs: number | null): Promise<Retried>;
  /**
   * Extends the attempt's lease to `leaseMs` from now, answering its new end; throws when the
   * attempt is no longer held. Used only after a delivery waited for a connection into its lease.
   */
  extend?(c: Claimed, leaseMs: number): Promise<number>;
  /** The receiver's credential for this job and attempt (append, heartbeat, ack, nack), or null. */
  deliveryToken(c: Claimed): Promise<string | null>;
  fetch(url: string, init: RequestInit): Promise<Response>;
}

export interface PushOptions {
  ns: string;
  queue: string;
  workerId: string;
  /** The claim lease the queue gives its workers; a delivery's lease also outlasts its request timeout. */
  leaseMs: number;
  maxLeaseMs: number;
  /** Most bytes of a 2xx body kept as the result (the plane's result limit). */
  resultBytes: number;
  maxDelayMs: number;
  now?: () => number;
  /** How long one claim waits for work before it asks again. */
  waitMs?: number;
  /** Most jobs in one claim (the plane's batch limit; default 1,000). */
  maxClaim?: number;
  /**
   * Most deliveries waiting for their receiver's headers at once, whatever the target's
   * concurrency (default: no bound of its own). A Cloudflare Worker or Durable Object has 6
   * connections waiting for headers, and holds a seventh unsent, its timeout running: past this
   * bound a delivery waits in the pusher instead, its timeout starting when it is sent.
   */
  connections?: number;
  /** Told of each delivery's outcome (the feed's log line). */
  onDelivered?: (d: Delivered) => void;
  /** Told as deliveries begin: the edge plane keeps its queue object awake while they are on their way. */
  onDelivering?: () => void;
}

/** A push queue's figures for the operator view: in flight, outcomes, the last error, receiver latency. */
export interface PushStats {
  url: string;
  concurrency: number;
  inFlight: number;
  delivered: Record<Delivered['outcome'], number>;
  lastError: { at: number; id: string; status: number | null; message: string } | null;
  /** The receiver's answer time over the last deliveries (ms): p50 and p99, null before any. */
  latencyMs: { p50: number; p99: number } | null;
}
