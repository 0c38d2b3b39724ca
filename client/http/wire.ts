/** Small pieces of the HTTP client: encoding, batch plumbing. */
import { fromBase64 } from '../../src/core/bytes.ts';
import { BadRequestError, errorFor, LakeshoreError } from '../errors.ts';
import { Batcher } from '../batcher.ts';
import { STATES, type State } from '../../src/core/states.ts';
import type { Invocation, InvocationError, JournalFrame, JournalPage, Outcome, QueueInfo, Schedule } from '../../src/core/types.ts';
import type { PushSettings } from '../../src/core/push-target.ts';
import type { InvocationSummary, QueueOverview } from '../../src/core/sql/list.ts';
import type { PushStats } from '../../src/core/push.ts';

export type Json = Record<string, unknown>;

export const b64 = (s: unknown): Uint8Array => {
  const b = typeof s === 'string' ? fromBase64(s) : null;
  if (!b) throw new LakeshoreError('internal', 'the plane answered bytes that are not base64');
  return b;
};

export const enc = encodeURIComponent;

/**
 * One segment of a path (an id, a worker id, a name), checked first as the plane checks it
 * (src/core/validate.ts, `segment`): an empty one would make a path with `//`, and `.` or `..`
 * would be resolved away by the URL itself (`/invocations/../ack` is `/ack`), sending the call to
 * another route.
 */
export function seg(what: string, s: string): string {
  if (typeof s !== 'string' || !s) throw new BadRequestError(`${what} must not be empty`);
  if (s === '.' || s === '..') throw new BadRequestError(`${what} must not be "." or "..": URLs resolve them away as path segments`);
  return encodeURIComponent(s);
}

/**
 * A queue's path, checked first: an empty name would make a path with `//` in it, which the plane
 * answers as no route; the local plane says "queue must not be empty", and so does this.
 */
export function queuePath(queue: string): string {
  if (typeof queue !== 'string' || !queue) throw new BadRequestError('queue must not be empty');
  return `/queues/${encodeURIComponent(queue)}`;
}

/** The batcher of one queue, made on first use. */
export function batcherFor<I, O>(
  map: Map<string, Batcher<I, O>>,
  queue: string,
  send: (items: I[]) => ReturnType<Batcher<I, O>['send']>,
): Batcher<I, O> {
  let b = map.get(queue);
  if (!b) {
    b = new Batcher(send);
    map.set(queue, b);
  }
  return b;
}

/** A batch route's per-item answers as settled results: each item keeps its own error class. */
export function settledOf(results: Json[]): ({ ok: true; value: Json } | { ok: false; error: Error })[] {
  return results.map((r) => {
    if (!r.error) return { ok: true as const, value: r };
    const e = r.error as { code: string; message: string };
    return { ok: false as const, error: errorFor(e.code, e.message) as Error };
  });
}

/** A journal frame as the plane answers it (a page's frame, or an SSE frame event's data). */
export const frameOf = (f: Json): JournalFrame => ({
  seq: Number(f.seq),
  kind: Number(f.kind) as JournalFrame['kind'],
  body: b64(f.body),
  meta: (f.meta as Json | null) ?? null,
  attempt: Number(f.attempt),
  final: f.final === true,
});

/** An outcome as the plane answers it (`result` and a journal page's `outcome`). */
export function outcomeOf(o: Json | null): Outcome | null {
  if (!o) return null;
  if (o.state === 'succeeded') return { state: 'succeeded', result: o.result === null || o.result === undefined ? null : b64(o.result) };
  if (o.state === 'failed' || o.state === 'cancelled')
    return { state: o.state, error: (o.error as InvocationError) ?? { message: String(o.state) } };
  return { state: o.state as 'queued' | 'running', timedOut: true };
}

export const pageOf = (p: Json): JournalPage => ({
  frames: (p.frames as Json[]).map(frameOf),
  next: Number(p.next),
  trimmedBefore: Number(p.trimmed_before),
  done: p.done === true,
  state: p.state as State,
  outcome: outcomeOf((p.outcome as Json | null) ?? null),
});

const opt = (v: unknown) => (v === null || v === undefined ? null : Number(v));

/** A listing's item (the row without envelope and result), as the plane answers it. */
export const summaryOf = (r: Json): InvocationSummary => ({
  id: String(r.id),
  namespace: String(r.namespace),
  queue: String(r.queue),
  key: (r.key as string | null) ?? null,
  priority: Number(r.priority),
  parent: (r.parent as string | null) ?? null,
  state: r.state as State,
  attempt: Number(r.attempt),
  workerId: (r.worker_id as string | null) ?? null,
  leaseUntil: opt(r.lease_until),
  error: (r.error as InvocationError | null) ?? null,
  createdAt: Number(r.created_at),
  updatedAt: Number(r.updated_at),
  startedAt: opt(r.started_at),
  finishedAt: opt(r.finished_at),
  runAt: opt(r.run_at),
  expiresAt: opt(r.expires_at),
  maxAttempts: opt(r.max_attempts),
});

/** An invocation's row, as `get` answers it. */
export const invocationOf = (r: Json): Invocation => ({
  ...summaryOf(r),
  envelope: b64(r.envelope),
  result: r.result === null || r.result === undefined ? null : b64(r.result),
});

export const overviewOf = (j: Json): QueueOverview => {
  const c = j.counts as Json;
  const r = j.recent as Json;
  const nums = (a: unknown) => (a as unknown[]).map(Number);
  return {
    ...queueInfoOf(j),
    counts: Object.fromEntries(STATES.map((s) => [s, Number(c[s])])) as QueueOverview['counts'],
    capped: j.capped as QueueOverview['capped'],
    oldestQueuedMs: opt(j.oldest_queued_ms),
    recent: { bucketMs: Number(r.bucket_ms), until: Number(r.until), succeeded: nums(r.succeeded), failed: nums(r.failed) },
    pushing: pushingOf(j.pushing as Json | null | undefined, (j.settings as Json).push as Json | null | undefined),
  };
};

/** The overview's `pushing` (a pusher's figures), with its target's url and concurrency from the settings. */
export function pushingOf(p: Json | null | undefined, target: Json | null | undefined): PushStats | null {
  if (!p) return null;
  const d = p.delivered as Json;
  const e = p.last_error as Json | null;
  const l = p.latency_ms as Json | null;
  return {
    url: String(target?.url ?? ''),
    concurrency: Number(target?.concurrency ?? 0),
    inFlight: Number(p.in_flight),
    delivered: { acked: Number(d.acked), accepted: Number(d.accepted), nacked: Number(d.nacked), refused: Number(d.refused) },
    lastError: e && { at: Number(e.at), id: String(e.id), status: e.status === null ? null : Number(e.status), message: String(e.message) },
    latencyMs: l && { p50: Number(l.p50), p99: Number(l.p99) },
  };
}

export function queueInfoOf(j: Json): QueueInfo {
  const s = j.settings as Json;
  const b = s.retry_backoff as Json | null;
  const n = (v: unknown) => (v === null || v === undefined ? null : Number(v));
  return {
    queue: String(j.queue),
    paused: j.paused === true,
    settings: {
      leaseMs: n(s.lease_ms),
      maxAttempts: n(s.max_attempts),
      maxRunning: n(s.max_running),
      claimsPerSecond: n(s.claims_per_second),
      retryBackoff: b && { initialMs: Number(b.initial_ms), factor: Number(b.factor), maxMs: Number(b.max_ms), jitter: Number(b.jitter) },
      deadLetterQueue: (s.dead_letter_queue as string | null) ?? null,
      ttlMs: n(s.ttl_ms),
      retentionMs: n(s.retention_ms),
      journalRetentionMs: n(s.journal_retention_ms),
      timeLimitMs: n(s.time_limit_ms),
      push: pushOf(s.push as Json | null | undefined),
    },
  };
}

const pushOf = (p: Json | null | undefined): PushSettings | null =>
  p
    ? {
        url: String(p.url),
        concurrency: Number(p.concurrency),
        timeoutMs: Number(p.timeout_ms),
        batchSize: Number(p.batch_size ?? 1),
        ...(typeof p.secret === 'string' ? { secret: p.secret } : {}),
      }
    : null;

export const scheduleOf = (j: Json): Schedule => ({
  queue: String(j.queue),
  name: String(j.name),
  cron: String(j.cron),
  timezone: (j.timezone as string | null) ?? null,
  envelope: b64(j.envelope),
  priority: Number(j.priority),
  nextAt: Number(j.next_at),
  lastAt: j.last_at === null ? null : Number(j.last_at),
});

/**
 * A batch route's caps: 1,000 items (the plane's default LIMIT_MAX_BATCH) and a 32 MiB body. The
 * client sends at most 500 items and about 30 MiB in one request, so a batch of any size goes in
 * parts that fit; each item still gets its own answer.
 */
export const PART_ITEMS = 500;
export const PART_BYTES = 30 << 20;

/** Base64 length of `n` bytes. */
export const b64Length = (n: number) => 4 * Math.ceil(n / 3);

/**
 * Sends `items` in parts within the caps above (`size`: an item's JSON length, roughly), in order,
 * and answers one result per item. A part the plane refuses as a whole (a type error, a body still
 * too large) answers its error for each of its items; the other parts stand.
 */
export async function inParts<W, R>(
  items: W[],
  size: (w: W) => number,
  send: (part: W[]) => Promise<R[]>,
  failed: (e: Error) => R,
): Promise<R[]> {
  const out: R[] = [];
  const flush = async (part: W[]) => {
    try {
      out.push(...(await send(part)));
    } catch (e) {
      const err = e instanceof Error ? e : new Error(String(e));
      out.push(...part.map(() => failed(err)));
    }
  };
  let part: W[] = [];
  let bytes = 0;
  for (const w of items) {
    const n = size(w) + 1;
    if (part.length && (part.length >= PART_ITEMS || bytes + n > PART_BYTES)) {
      await flush(part);
      part = [];
      bytes = 0;
    }
    part.push(w);
    bytes += n;
  }
  if (part.length) await flush(part);
  return out;
}

/** JSON has no NaN or Infinity (they would arrive as null, i.e. "use the default"): refuse them here. */
export function finiteOnly(key: string, value: unknown): unknown {
  if (typeof value === 'number' && !Number.isFinite(value)) throw errorFor('bad_request', `${key} must be a finite number`);
  return value;
}
