/**
 * The dispatch contract's vocabulary.
 *
 * - **namespace**: a tenant. Nothing of one namespace is visible from another.
 * - **queue** (also **pool**): a named line of work inside a namespace. Workers claim from pools.
 * - **invocation**: one submitted unit of work. One row holds its queue entry, metadata and state.
 * - **envelope**: the invocation's payload, opaque bytes the plane never decodes.
 * - **attempt**: how many times the invocation has been claimed; each claim starts a new attempt.
 * - **lease**: a deadline by which the claiming worker must ack, nack or heartbeat.
 * - **worker**: a process that claims invocations; it names itself with a worker id.
 * - **frame**: one record of an invocation's journal: a yield, a chunk, an error, a marker.
 * - **journal**: the ordered frames of an invocation, streamed live to readers.
 * - **plane**: an implementation of the contract: the edge plane (Workers, Durable Objects, D1)
 *   or the local plane (SQLite in the process).
 */

import type { State } from './states.ts';
import type { PushSettings } from './push-target.ts';
import type { JournalFrame } from './frame.ts';

export type { Frame, JournalFrame } from './frame.ts';

export type ClaimKind = 'fifo' | 'filo' | 'boltzmann';
export const CLAIM_KINDS: readonly ClaimKind[] = Object.freeze(['fifo', 'filo', 'boltzmann']);
/** What a claim may ask for: a kind, or `priority`, the contract's name for fifo (it takes the highest priority first, then the oldest). */
export type ClaimKindName = ClaimKind | 'priority';
export const CLAIM_KIND_NAMES: readonly ClaimKindName[] = Object.freeze([...CLAIM_KINDS, 'priority']);

/** An invocation as the contract presents it (what `get` answers). */
export interface Invocation {
  /** Caller-supplied id, unique in its namespace. */
  id: string;
  namespace: string;
  queue: string;
  /** Idempotency key, unique per (namespace, queue), or null. */
  key: string | null;
  priority: number;
  /** Id of the invocation that submitted this one, or null. */
  parent: string | null;
  envelope: Uint8Array;
  state: State;
  /** Number of claims so far; 0 while never claimed. */
  attempt: number;
  /** The worker holding the current attempt, while running. */
  workerId: string | null;
  /** Epoch ms by which the running attempt must be acked, nacked or heartbeaten. */
  leaseUntil: number | null;
  /** Terminal result bytes of a succeeded invocation. */
  result: Uint8Array | null;
  /** Why a failed or cancelled invocation ended. */
  error: InvocationError | null;
  createdAt: number;
  updatedAt: number;
  startedAt: number | null;
  finishedAt: number | null;
  /** While delayed: epoch ms from which it may be claimed. */
  runAt: number | null;
  /** Epoch ms after which, if still waiting, it fails as Expired; null: never. */
  expiresAt: number | null;
  /** Its own attempt budget; null: the queue's, else the plane's. */
  maxAttempts: number | null;
}

/** A queue's own settings; null where the plane's default (or nothing) applies. */
export interface QueueSettings {
  leaseMs: number | null;
  maxAttempts: number | null;
  /** Most of its invocations running at once. */
  maxRunning: number | null;
  /** Claims handed out per second at most; claims over it wait. */
  claimsPerSecond: number | null;
  /** The delay before a retry (after a nack with retry, or an expired lease). */
  retryBackoff: Backoff | null;
  /** Where a job that fails for good is also submitted, as a dead letter. */
  deadLetterQueue: string | null;
  /** TTL of a submit that names none. */
  ttlMs: number | null;
  /** How long finished jobs are kept before they are purged; null: the plane's default (7 days). */
  retentionMs: number | null;
  /** The time limit of the queue's jobs that name none (ms), which workers apply; null: the worker's (600 s by default). */
  /** How long a finished job's frames are kept when less than the job (retention); null: they go with it. */
  journalRetentionMs: number | null;
  timeLimitMs: number | null;
  /** Where its jobs are POSTed (push delivery, core/push-target.ts); null: workers pull them. */
  push: PushSettings | null;
}

/** Retry backoff: attempt n waits min(maxMs, initialMs * factor^(n-1)), times 1 ± jitter at random. */
export interface Backoff {
  initialMs: number;
  factor: number;
  maxMs: number;
  /** 0 to 1: how far a delay may be spread either way. */
  jitter: number;
}

/** A queue as an operator sees it: its settings, and whether it is paused. */
export interface QueueInfo {
  queue: string;
  paused: boolean;
  settings: QueueSettings;
}

/** A cron schedule of a queue: each tick submits `envelope`, keyed `schedule:<name>:<tick ms>`. */
export interface Schedule {
  queue: string;
  name: string;
  cron: string;
  /** IANA zone the expression is read in; null: UTC. */
  timezone: string | null;
  envelope: Uint8Array;
  priority: number;
  /** The next tick, epoch ms. */
  nextAt: number;
  /** The last tick submitted; null: none yet. */
  lastAt: number | null;
}

/** The error a failed invocation carries. `type` names its origin (e.g. a worker exception class). */
export interface InvocationError {
  message: string;
  type?: string;
  stack?: string;
  [extra: string]: unknown;
}

/** What a successful claim hands the worker. */
export interface Claimed {
  id: string;
  queue: string;
  envelope: Uint8Array;
  attempt: number;
  /**
   * Which attempt of the job's current budget this is (1 for its first): the attempt number less
   * those not charged, a claim put back uncharged (its answer never reached its worker) and every
   * attempt before an operator's retry, which gives a fresh budget. What a worker's own `retries`
   * counts against (docs/contract.md, "The worker's budget").
   */
  budgetAttempt: number;
  leaseUntil: number;
  priority: number;
}

export interface HeartbeatAnswer {
  leaseUntil: number | null;
  /** True when the invocation was cancelled: the worker should stop. */
  cancelled: boolean;
}

/** What `result` answers once the invocation is terminal, or when the wait ran out. */
export type Outcome =
  | { state: 'succeeded'; result: Uint8Array | null }
  | { state: 'failed' | 'cancelled'; error: InvocationError }
  | { state: 'delayed' | 'queued' | 'running'; timedOut: true };

/** A page of journal frames, plus the row's state so readers know when the stream is over. */
export interface JournalPage {
  frames: JournalFrame[];
  /** Seq of the last frame returned, or the cursor passed in when none. Resume with `since = next`. */
  next: number;
  /**
   * The highest seq a trim removed, -1 when nothing was trimmed. A reader whose cursor (`since`)
   * is below it missed frames: `since < trimmedBefore` means lost frames, and nothing else does.
   */
  trimmedBefore: number;
  /** True once no further frame can come: a final frame was read or the row is terminal. */
  done: boolean;
  state: State;
  /** Filled when `done` because the invocation is terminal: its outcome from the row. */
  outcome: Outcome | null;
}
