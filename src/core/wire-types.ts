/**
 * The bodies of the HTTP contract as TypeScript types: what travels, in snake_case. The HTTP
 * client builds its bodies as these; src/core/wire.ts checks them on the plane with zod schemas
 * tied to these types. No runtime code: the client imports it without zod.
 */
import type { ClaimKindName } from './types.ts';

export interface SubmitWire {
  id: string;
  envelope: string;
  key?: Opt<string>;
  priority?: Opt<number>;
  parent?: Opt<string>;
  delay_ms?: Opt<number>;
  run_at?: Opt<number>;
  ttl_ms?: Opt<number>;
  expires_at?: Opt<number>;
  max_attempts?: Opt<number>;
}

export interface AckWire {
  id: string;
  attempt?: Opt<number>;
  result?: Opt<string>;
}

export interface ClaimWire {
  worker_id: string;
  kind?: Opt<ClaimKindName>;
  temperature?: Opt<number>;
  lease_ms?: Opt<number>;
  wait_ms?: Opt<number>;
  max?: Opt<number>;
  /** Acks of this worker's finished invocations of the queue, sent with the claim (see ackAndClaim). */
  acks?: Opt<AckWire[]>;
  /** The caller's name for this claim, so that it can call the claim off (POST .../claim/cancel). */
  claim_id?: Opt<string>;
  /** Who the worker is (sent at its start and now and then): the plane lists it (GET /workers). */
  worker?: Opt<WorkerInfoWire>;
}

export interface WorkerInfoWire {
  queues?: Opt<string[]>;
  host?: Opt<string>;
  pid?: Opt<number>;
  version?: Opt<string>;
  concurrency?: Opt<number>;
}

/** Calls off a claim of this worker named by its claim_id. */
/** Log lines of a worker's jobs, for the feed (POST /queues/:queue/workers/:worker/log). */
export interface WorkerLogWire {
  lines: { id: string; level: string; message: string; trace_id?: string | null; at?: number | null }[];
}

/** A wait on many jobs of one queue (POST /queues/:queue/results): at most LIMIT_MAX_BATCH ids. */
export interface GetManyWire {
  ids: string[];
}

export interface ResultsWire {
  ids: string[];
  timeout_ms?: number | null;
  /** The last answer's cursor, when asking again for the rest: only the jobs ended since are read again. */
  after?: string | null;
}

export interface ClaimCancelWire {
  worker_id: string;
  claim_id: string;
}

/** Jobs a worker claimed and never started, given back uncharged (POST /queues/:queue/release). */
export interface ReleaseWire {
  worker_id: string;
  items: { id: string; attempt: number | null }[];
}

export interface HolderWire {
  /** Required, except with a delivery token (docs/contract.md, "Push delivery"), which names its own attempt. */
  worker_id?: Opt<string>;
  attempt?: Opt<number>;
}

export interface BackoffWire {
  initial_ms?: Opt<number>;
  factor?: Opt<number>;
  max_ms?: Opt<number>;
  jitter?: Opt<number>;
}

/** A queue's settings to change: a field left out keeps its value, a null clears it. */
export interface QueueSettingsWire {
  lease_ms?: Opt<number>;
  max_attempts?: Opt<number>;
  max_running?: Opt<number>;
  claims_per_second?: Opt<number>;
  retry_backoff?: Opt<BackoffWire>;
  dead_letter_queue?: Opt<string>;
  ttl_ms?: Opt<number>;
  retention_ms?: Opt<number>;
  journal_retention_ms?: Opt<number>;
  time_limit_ms?: Opt<number>;
  /** Push delivery's target, or null: workers pull. */
  push?: Opt<PushWire>;
}

/** A push target: where, how many at once, how long each may take, how many jobs in one; `rotate_secret` makes a new secret. */
export interface PushWire {
  url: string;
  concurrency?: Opt<number>;
  timeout_ms?: Opt<number>;
  batch_size?: Opt<number>;
  rotate_secret?: Opt<boolean>;
}

export interface RedriveWire {
  limit?: Opt<number>;
  /** The state to redrive from: failed, the only one. */
  state?: Opt<'failed'>;
  /** On a dead-letter queue: send its dead letters' failed jobs back to their queues. */
  dead_letters?: Opt<boolean>;
}

export interface PurgeWire {
  /** The finished state whose jobs go: succeeded, failed or cancelled. */
  state: 'succeeded' | 'failed' | 'cancelled';
  /** At most this many (default and most: 1,000); oldest submitted first. */
  limit?: Opt<number>;
}

export interface ScheduleWire {
  cron: string;
  timezone?: Opt<string>;
  envelope: string;
  priority?: Opt<number>;
}

/** A token's own limits (requests per second, burst, open journal streams); unset ones use the plane's. */
export interface TokenLimits {
  requests_per_second?: number;
  request_burst?: number;
  streams?: number;
}

export interface TokenWire {
  role: string;
  pools?: Opt<string[]>;
  name?: Opt<string>;
  limits?: Opt<TokenLimits>;
}

/** A stream token for one invocation (POST .../invocations/:id/stream-token). */
export interface StreamTokenWire {
  ttl_ms?: Opt<number>;
  streams?: Opt<number>;
}

export type Opt<T> = T | null | undefined;

export type AckBodyWire = HolderWire & { result?: Opt<string> };

export type ErrorWire = string | { message: string; [k: string]: unknown };

/** `max_attempts`: the worker's budget, used only when neither the job nor its queue sets one. */
export type NackWire = HolderWire & { error: ErrorWire; retry?: Opt<boolean>; delay_ms?: Opt<number>; max_attempts?: Opt<number> };

export type HeartbeatWire = HolderWire & { lease_ms?: Opt<number> };

export type AppendWire = HolderWire & {
  seq?: Opt<number>;
  kind: number;
  body: string;
  meta?: Opt<Record<string, unknown>>;
  final?: Opt<boolean>;
};
