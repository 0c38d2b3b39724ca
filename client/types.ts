/** What both planes' clients offer: the dispatch contract in camelCase, bytes as Uint8Array. */
import type { State } from '../src/core/states.ts';
import type {
  Backoff,
  Claimed,
  ClaimKind,
  ClaimKindName,
  Frame,
  HeartbeatAnswer,
  Invocation,
  JournalFrame,
  JournalPage,
  QueueInfo,
  QueueSettings,
  Schedule,
} from '../src/core/types.ts';

export type {
  Backoff,
  Claimed,
  ClaimKind,
  ClaimKindName,
  Frame,
  HeartbeatAnswer,
  Invocation,
  JournalFrame,
  JournalPage,
  QueueInfo,
  QueueSettings,
  Schedule,
  State,
};

import type { InvocationSummary, Page as InvocationPage, QueueOverview } from '../src/core/sql/list.ts';
import type { Ended } from './errors.ts';
import type { StorageState } from './operator-types.ts';

export type { Ended };
export type { MoveReport, ShardInfo, ShardNamespace, StorageState } from './operator-types.ts';

/** Where a nack left the job: waiting for another attempt (queued, or delayed by a backoff), or failed for good. */
export type NackedState = 'queued' | 'delayed' | 'failed';

export interface SubmitOptions {
  /** Caller-chosen id, unique in the namespace. Resubmitting the same id to the same queue is a no-op. */
  id: string;
  /** Idempotency key, unique per queue: a resubmit with it answers the existing invocation's id. */
  key?: string | null;
  priority?: number;
  parent?: string | null;
  /** Not claimable for this many ms (delayed until then); or give `runAt`, epoch ms. */
  delayMs?: number;
  runAt?: number;
  /** Fails as Expired if not claimed within this many ms; or give `expiresAt`, epoch ms. Default: the queue's TTL, if any. */
  ttlMs?: number;
  expiresAt?: number;
  /** This job's own attempt budget; default: the queue's, else the plane's (3). */
  maxAttempts?: number;
}

/** Settings to change: a field left out keeps its value, a null clears it (back to the plane's default). */
export interface SettingsChange {
  leaseMs?: number | null;
  maxAttempts?: number | null;
  maxRunning?: number | null;
  claimsPerSecond?: number | null;
  /** Missing parts default: initialMs 0, factor 2, maxMs 1 h, jitter 0. */
  retryBackoff?: Partial<Backoff> | null;
  deadLetterQueue?: string | null;
  ttlMs?: number | null;
  /** How long finished jobs are kept before they are purged (default 7 days). */
  retentionMs?: number | null;
  /** The time limit of the queue's jobs that name none, which workers apply (default: the worker's, 600 s). */
  /** How long a finished job's frames are kept, when less than the job itself (from 0 ms); null: they go with it. */
  journalRetentionMs?: number | null;
  timeLimitMs?: number | null;
  /**
   * Push delivery: the plane POSTs the queue's jobs to `url`, signed (docs/contract.md, "Push
   * delivery"); null turns it off. The answer that first sets it, or rotates its secret, carries
   * `settings.push.secret`, once. Admin tokens only.
   */
  push?: PushChange | null;
}

/**
 * A push target to set: `concurrency` (default 8) deliveries at once, each up to `timeoutMs`
 * (default 30 s), each of one job or, with `batchSize` above 1 (default 1, at most 100), a batch
 * of up to that many.
 */
export interface PushChange {
  url: string;
  concurrency?: number;
  timeoutMs?: number;
  batchSize?: number;
  /** A new signing secret; the old one keeps signing too for 24 hours. */
  rotateSecret?: boolean;
}

export interface ScheduleOptions {
  /** A cron expression, 5 fields (minute first) or 6 (seconds first). */
  cron: string;
  /** IANA time zone the expression is read in; default UTC. */
  timezone?: string | null;
  envelope: Uint8Array;
  priority?: number;
}

export interface ClaimOptions {
  /** fifo (default; `priority` is its other name), filo or boltzmann. */
  kind?: ClaimKindName;
  temperature?: number;
  /** Wait up to this long for work when the queue is empty. Default 0: answer at once. */
  waitMs?: number;
  leaseMs?: number;
  /** Gives up a waiting claim early (e.g. a worker shutting down). */
  signal?: AbortSignal;
  /** Who the worker is, for the plane's worker list (runWorker sends it at start and now and then). */
  worker?: WorkerInfo;
}

export interface WorkerInfo {
  queues?: string[];
  host?: string;
  pid?: number;
  version?: string;
  concurrency?: number;
}

/** A page of queues' overviews (`overviewPage`): pass `next` as `after` for the next page; null after the last. */
export interface QueuePage {
  queues: QueueOverview[];
  next: string | null;
}

/** A worker as the plane lists it (GET /workers): what it said, when it was last heard from, what it holds. */
export interface WorkerSeen {
  worker_id: string;
  status: 'active' | 'stopped' | 'lost';
  queues: string[];
  host: string | null;
  pid: number | null;
  version: string | null;
  concurrency: number | null;
  first_seen: number;
  last_seen: number;
  holding: { id: string; queue: string }[];
}

export interface HolderOptions {
  /** The attempt from the claim. Sent when known, so a stale attempt of the same worker is fenced too. */
  attempt?: number;
}

export interface NackOptions extends HolderOptions {
  error: string | { message: string; [k: string]: unknown };
  /** Wait again while attempts are left (default); false fails the job now. */
  retry?: boolean;
  /** With retry: wait this long before the next attempt (instead of the queue's backoff). */
  delayMs?: number;
  /**
   * The worker's attempt budget (its `retries` + 1), used only when neither the job nor its queue
   * sets one, in place of the plane's default (3).
   */
  maxAttempts?: number;
}

export interface AckRequest {
  id: string;
  /** The attempt from the claim. */
  attempt?: number;
  result?: Uint8Array | null;
}

export interface AppendOptions extends HolderOptions {
  /** Ends the stream. Defaults to true for END and ERROR frames. */
  final?: boolean;
  /** The claiming worker; defaults to the worker that claimed `id` through this client. */
  workerId?: string;
}

export interface ReadOptions {
  /** Read frames after this seq; -1 (default) reads from the start. */
  since?: number;
  /** Give up (TimeoutError) when this long passes with no frame and no end: each frame starts it again. Default: no limit. */
  timeoutMs?: number;
  signal?: AbortSignal;
}

/** A stream token (HttpDispatch.streamToken): hand `url` to a browser's EventSource. */
export interface StreamToken {
  token: string;
  /** The journal's SSE URL with the token in its query. */
  url: string;
  /** Epoch ms. */
  expiresAt: number;
  id: string;
  queue: string;
  /** How many streams it may hold open at once. */
  streams: number;
}

export interface ListOptions {
  state?: State;
  /** 1 to 1,000; default 50. */
  limit?: number;
  cursor?: string | null;
}

export type { InvocationSummary, Page as InvocationPage, QueueOverview } from '../src/core/sql/list.ts';
export type { JobRecord, JobStatus, LogLevel, LogLine, LogRecord, WorkerRecord } from '../src/core/feed.ts';
import type { JobRecord, LogLine, LogRecord, WorkerRecord } from '../src/core/feed.ts';

/** An item of a queue's lifecycle feed: a job's transition, a worker's coming and going, or word that records were missed (list again). */
/**
 * A feed's record, or a `gap`: records were missed (`behind`: the reader fell out of the window;
 * `restarted`: the queue object restarted) or may be missing (`joined`: a queue that started
 * while a namespace-wide reader was connected); `queue` names the queue on a namespace-wide feed.
 */
export type FeedItem =
  | JobRecord
  | WorkerRecord
  | LogRecord
  | { kind: 'gap'; reason: 'behind' | 'restarted' | 'joined'; resumed_at?: number; queue?: string };

export interface FeedOptions {
  signal?: AbortSignal;
  /** Only these kinds of records (default: both). */
  kinds?: ('job' | 'worker')[];
}

export interface DispatchPlane {
  readonly namespace: string;
  /** True for a plane in this process (the local SQLite plane): its envelopes come from this machine's own users. */
  readonly inProcess?: boolean;
  submit(queue: string, envelope: Uint8Array, opts: SubmitOptions): Promise<string>;
  /** Submits many in one request; each item keeps its own id, key and idempotency, and fails alone. */
  submitMany(queue: string, items: { envelope: Uint8Array; opts: SubmitOptions }[]): Promise<({ id: string } | { error: Error })[]>;
  claim(queue: string, workerId: string, opts?: ClaimOptions): Promise<Claimed | null>;
  claimMany(queue: string, workerId: string, max: number, opts?: ClaimOptions): Promise<Claimed[]>;
  /**
   * This worker's acks of finished invocations of `queue` and its next claim, in one request and
   * one storage batch. Each ack is fenced alone and answers its own error (or null); a claim
   * that carries acks waits at most 25 ms for work (claim again without acks to wait longer).
   */
  ackAndClaim(
    queue: string,
    workerId: string,
    acks: AckRequest[],
    max: number,
    opts?: ClaimOptions,
  ): Promise<{ acks: (Error | null)[]; claimed: Claimed[] }>;
  ack(id: string, workerId: string, opts?: HolderOptions & { result?: Uint8Array | null }): Promise<void>;
  /**
   * Gives back jobs of `queue` this worker claimed and never started (it is stopping, say): each
   * still its own at that attempt (default: the one this client claimed) goes back to the queue,
   * its attempt not charged, unlike a nack's. Answers the ids put back; the others are no longer
   * the worker's and stay as they are.
   */
  release(queue: string, workerId: string, items: { id: string; attempt?: number }[]): Promise<string[]>;
  /**
   * With `retry` (default) the job waits again (`delayMs`, else its queue's backoff) while attempts
   * are left; else, or on its last attempt, it fails. Answers where it went.
   */
  nack(id: string, workerId: string, opts: NackOptions): Promise<NackedState>;
  heartbeat(id: string, workerId: string, opts?: HolderOptions & { leaseMs?: number }): Promise<HeartbeatAnswer>;
  cancel(id: string): Promise<boolean>;
  /** Puts a failed job back in its queue with a fresh attempt budget (same id, journal kept); anything else is a FencingConflictError. */
  retry(id: string): Promise<void>;
  /** Deletes a finished job (succeeded, failed or cancelled) and its frames; missing: NotFoundError; not finished: FencingConflictError. */
  delete(id: string): Promise<void>;
  get(id: string): Promise<Invocation | null>;
  /**
   * Up to 1,000 jobs of the namespace at once, in the order asked: each one's row without its
   * envelope and result (as a listing gives it: its queue, state, attempt, error, times), or null
   * where there is no such job. One request, one read.
   */
  getMany(ids: string[]): Promise<(InvocationSummary | null)[]>;
  /** Waits for the invocation to end: its result bytes, or InvocationFailedError / InvocationCancelledError / TimeoutError. */
  result(id: string, opts?: { timeoutMs?: number; signal?: AbortSignal }): Promise<Uint8Array | null>;
  /**
   * Waits on many jobs of `queue` at once (at most 1,000 ids) in one call: answers, as soon as any
   * has ended, each that has, and each the queue does not have; none once `timeoutMs` (default
   * 30 s, at most the result wait's limit) passed. What `result()` waits with for many jobs.
   */
  results(queue: string, ids: string[], opts?: { timeoutMs?: number; signal?: AbortSignal }): Promise<Ended[]>;
  count(queue: string, state?: State): Promise<number>;
  journalAppend(id: string, seq: number | null, frame: Frame | Uint8Array, opts?: AppendOptions): Promise<number>;
  journalRead(id: string, opts?: ReadOptions): AsyncIterable<JournalFrame>;
  /**
   * One page of the journal after `since`, without waiting: its frames, whether the stream is done,
   * the row's state and outcome, and `trimmedBefore` (the highest seq a trim removed: a cursor below
   * it missed frames).
   */
  journalPage(id: string, opts?: { since?: number; limit?: number }): Promise<JournalPage>;
  journalTrim(id: string, keepLast: number): Promise<number>;
  /** The namespace's queues that ever held work or settings. */
  listQueues(): Promise<string[]>;
  /**
   * Each queue of the namespace (or those named): its delayed, queued and running counts, how long
   * its longest-waiting job has waited, paused, and its settings.
   */
  overview(queues?: string[]): Promise<QueueOverview[]>;
  /**
   * One page of the namespace's queues' overviews, in name order after `after` (none: the first
   * page): `limit` of them (1 to 100, the default), and `next`, the `after` of the next page (null:
   * this was the last). What a view of a namespace of many queues reads, one page at a time.
   */
  overviewPage(opts?: { after?: string | null; limit?: number }): Promise<QueuePage>;
  /**
   * A page of a queue's invocations in one state (default queued; claim order for queued, soonest
   * first for running and delayed, newest first for finished states), without envelopes and
   * results. Pass the answer's `cursor` for the next page; null: that was the last.
   */
  list(queue: string, opts?: ListOptions): Promise<InvocationPage>;
  /**
   * The lifecycle feed of `queue` (null: of every queue of the namespace), live: a record per
   * committed transition, each queue's in commit order, until `signal` aborts; `kinds` keeps only
   * job or worker records. Over HTTP it resumes after a dropped connection and says `gap` when
   * records were missed; on the local plane it tells every process's on the file (feed-log.ts).
   */
  events(queue: string | null, opts?: FeedOptions): AsyncIterable<FeedItem>;
  /** The namespace's metrics in the Prometheus text format (docs/contract.md, "Metrics"). */
  metrics(): Promise<string>;
  /**
   * The namespace's database (its shard, on the edge plane) against its storage budget: past the
   * high-water mark submits raise StorageFullError (docs/contract.md, "Storage").
   */
  storage(): Promise<StorageState>;
  /**
   * The workers heard from lately, each once across its queues: what it said of itself, when last
   * heard, what it holds. On the local plane, the workers this process heard from.
   */
  workers(): Promise<WorkerSeen[]>;
  /** This worker stops (runWorker says so at shutdown): the feed tells stopped, not lost. */
  workerStopped(queue: string, workerId: string): Promise<void>;
  /** Log lines of this worker's jobs of `queue`, for the feed's readers (runWorker sends currentJob().log's, best effort). */
  workerLog(queue: string, workerId: string, lines: LogLine[]): Promise<void>;
  /** Changes the settings named (a null clears one); answers the queue's settings. */
  configureQueue(queue: string, settings: SettingsChange): Promise<QueueInfo>;
  queueInfo(queue: string): Promise<QueueInfo>;
  /** A paused queue accepts submits but hands out nothing until resumed. */
  pauseQueue(queue: string): Promise<void>;
  resumeQueue(queue: string): Promise<void>;
  /**
   * Retries up to `limit` (default 100) failed jobs of the queue, oldest first. With `deadLetters`,
   * on a dead-letter queue: sends its dead letters' failed jobs back to their queues. Answers the retried jobs.
   */
  redrive(queue: string, opts?: { limit?: number; deadLetters?: boolean }): Promise<{ id: string; queue: string }[]>;
  /**
   * Deletes up to `limit` (default and most 1,000) finished jobs of one state of the queue, oldest
   * submitted first, with their frames; answers how many (call again while it answers `limit`).
   * An admin's verb.
   */
  purge(queue: string, opts: { state: 'succeeded' | 'failed' | 'cancelled'; limit?: number }): Promise<number>;
  /** Sets a cron schedule of the queue: each tick submits `envelope`, keyed `schedule:<name>:<tick ms>`. */
  setSchedule(queue: string, name: string, opts: ScheduleOptions): Promise<Schedule>;
  listSchedules(queue: string): Promise<Schedule[]>;
  removeSchedule(queue: string, name: string): Promise<void>;
  close(): Promise<void>;
}
