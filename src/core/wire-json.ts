/** Contract values -> the JSON the HTTP routes answer. Bytes become base64; keys are snake_case. */
import { toBase64 } from './bytes.ts';
import type { ErrorBody, Settled } from './settled.ts';
import type { InvocationSummary, Page, QueueOverview } from './sql/list.ts';
import type { StorageState } from './storage.ts';
import type { PushStats } from './push.ts';
import type { Ended } from './results.ts';
import type { Claimed, Invocation, JournalFrame, JournalPage, Outcome, QueueInfo, QueueSettings, Schedule } from './types.ts';

const b64 = (b: Uint8Array | null) => (b === null ? null : toBase64(b));

/** The namespace's database against its storage budget (core/storage.ts). */
export const storageJson = (s: StorageState) => ({
  shard: s.shard,
  bytes: s.bytes,
  limit_bytes: s.limitBytes,
  high_water_bytes: s.highWaterBytes,
  full: s.full,
});

/** A listing's item: the row without its envelope and result (get has those). */
export const summaryJson = (i: InvocationSummary) => ({
  id: i.id,
  namespace: i.namespace,
  queue: i.queue,
  key: i.key,
  priority: i.priority,
  parent: i.parent,
  state: i.state,
  attempt: i.attempt,
  worker_id: i.workerId,
  lease_until: i.leaseUntil,
  error: i.error,
  created_at: i.createdAt,
  updated_at: i.updatedAt,
  started_at: i.startedAt,
  finished_at: i.finishedAt,
  run_at: i.runAt,
  expires_at: i.expiresAt,
  max_attempts: i.maxAttempts,
});

/** The whole row: a listing's item with its envelope and result. */
export const invocationJson = (i: Invocation) => ({ ...summaryJson(i), envelope: b64(i.envelope), result: b64(i.result) });

export const pageOfJson = (p: Page) => ({ items: p.items.map(summaryJson), cursor: p.cursor });

export const overviewJson = (q: QueueOverview) => ({
  ...queueInfoJson(q),
  counts: q.counts,
  capped: q.capped,
  oldest_queued_ms: q.oldestQueuedMs,
  recent: { bucket_ms: q.recent.bucketMs, until: q.recent.until, succeeded: q.recent.succeeded, failed: q.recent.failed },
  pushing: q.pushing && pushingJson(q.pushing),
});

/** A pusher's figures (the overview's `pushing`; its target is the queue's `settings.push`). */
export const pushingJson = (p: PushStats) => ({
  in_flight: p.inFlight,
  delivered: p.delivered,
  last_error: p.lastError,
  latency_ms: p.latencyMs,
});

export const settingsJson = (s: QueueSettings) => ({
  lease_ms: s.leaseMs,
  max_attempts: s.maxAttempts,
  max_running: s.maxRunning,
  claims_per_second: s.claimsPerSecond,
  retry_backoff: s.retryBackoff && {
    initial_ms: s.retryBackoff.initialMs,
    factor: s.retryBackoff.factor,
    max_ms: s.retryBackoff.maxMs,
    jitter: s.retryBackoff.jitter,
  },
  dead_letter_queue: s.deadLetterQueue,
  ttl_ms: s.ttlMs,
  retention_ms: s.retentionMs,
  journal_retention_ms: s.journalRetentionMs,
  time_limit_ms: s.timeLimitMs,
  push: s.push && {
    url: s.push.url,
    concurrency: s.push.concurrency,
    timeout_ms: s.push.timeoutMs,
    batch_size: s.push.batchSize,
    ...(s.push.secret ? { secret: s.push.secret } : {}),
  },
});

export const queueInfoJson = (q: QueueInfo) => ({ queue: q.queue, paused: q.paused, settings: settingsJson(q.settings) });

export const scheduleJson = (s: Schedule) => ({
  queue: s.queue,
  name: s.name,
  cron: s.cron,
  timezone: s.timezone,
  envelope: toBase64(s.envelope),
  priority: s.priority,
  next_at: s.nextAt,
  last_at: s.lastAt,
});

export const claimedJson = (c: Claimed) => ({
  id: c.id,
  queue: c.queue,
  envelope: toBase64(c.envelope),
  attempt: c.attempt,
  budget_attempt: c.budgetAttempt,
  lease_until: c.leaseUntil,
  priority: c.priority,
});

export const frameJson = (f: JournalFrame) => ({
  seq: f.seq,
  kind: f.kind,
  body: toBase64(f.body),
  meta: f.meta,
  attempt: f.attempt,
  final: f.final,
});

export function outcomeJson(o: Outcome | null) {
  if (!o) return null;
  if (o.state === 'succeeded') return { state: o.state, result: b64(o.result) };
  if (o.state === 'failed' || o.state === 'cancelled') return { state: o.state, error: o.error };
  return { state: o.state, timed_out: true };
}

/** A job a wait on many answered (core/results.ts): `{id, state, result}`, `{id, state, error}`, or `{id, error: {code, message}}`. */
export const endedJson = (e: Ended) => ('error' in e ? { id: e.id, error: e.error } : { id: e.id, ...outcomeJson(e.outcome) });

export const pageJson = (p: JournalPage) => ({
  frames: p.frames.map(frameJson),
  next: p.next,
  trimmed_before: p.trimmedBefore,
  done: p.done,
  state: p.state,
  outcome: outcomeJson(p.outcome),
});

/** What the `end` event of a journal stream carries. */
export const endJson = (p: JournalPage) => ({ state: p.state, trimmed_before: p.trimmedBefore, outcome: outcomeJson(p.outcome) });

/** One item of a batch answer: its value as JSON, or its own error. */
export const itemJson = <T, J>(r: Settled<T>, json: (v: T) => J): J | { error: ErrorBody } => (r.ok ? json(r.value) : { error: r.error });
