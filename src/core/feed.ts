/**
 * The lifecycle feed and the transition counters. Every committed transition is counted per
 * queue (what the metrics' counters read) and, while anyone listens, told as a record:
 *
 *   {kind: "job", id, queue, status, attempt, worker_id, error?, at}
 *
 * status: queued (submitted, released, retried by hand, or due after a delay), delayed, running,
 * succeeded, failed, cancelled, retrying (back to waiting after a nack or an expired lease),
 * expired (its TTL passed while it waited). Records are told after their batch committed, in
 * commit order. The feed is never load-bearing: a listener's failure is swallowed, and with no
 * listener no record is even made.
 */
import { badRequest } from './errors.ts';
import type { Limits } from './limits.ts';
import type { InvocationError } from './types.ts';
import * as v from './validate.ts';

export type JobStatus = 'queued' | 'delayed' | 'running' | 'succeeded' | 'failed' | 'cancelled' | 'retrying' | 'expired';

export interface JobRecord {
  kind: 'job';
  id: string;
  queue: string;
  status: JobStatus;
  attempt: number | null;
  worker_id: string | null;
  error?: InvocationError | null;
  /** The trace the job belongs to (its envelope's traceparent), when the feed knows it. */
  trace_id?: string;
  at: number;
}

/** What the feed says of a worker: it started (first heard from), stopped (said so), or was lost (went silent). */
export interface WorkerRecord {
  kind: 'worker';
  worker_id: string;
  queue: string;
  status: 'started' | 'stopped' | 'lost';
  at: number;
}

/** A line a job's handler logged (currentJob().log), told by its worker: best effort, as the worker's stderr keeps its copy. */
export interface LogRecord {
  kind: 'worker';
  worker_id: string;
  queue: string;
  /** The job whose handler logged it. */
  id: string;
  level: LogLevel;
  message: string;
  /** The trace the line was logged in (the job's run span), when it had one. */
  trace_id?: string;
  at: number;
}

/**
 * An error as a feed record carries it: whole when its JSON is at most FEED_ERROR_CHARS, else its
 * `type` and the start of its `message`, marked `truncated` (`get` answers the whole). A queue object
 * keeps its last 10,000 records in memory for readers that come back, and an error may be 1 MiB:
 * a storm of failures with long tracebacks would pass an isolate's 128 MB.
 */
export const FEED_ERROR_CHARS = 2048;
const FEED_MESSAGE_CHARS = 500;

export function feedError(e: InvocationError): InvocationError {
  if (JSON.stringify(e).length <= FEED_ERROR_CHARS) return e;
  const message = typeof e.message === 'string' ? e.message : String(e.message);
  return {
    ...(typeof e.type === 'string' ? { type: e.type.slice(0, 200) } : {}),
    message: message.length > FEED_MESSAGE_CHARS ? `${message.slice(0, FEED_MESSAGE_CHARS - 1)}…` : message,
    truncated: true,
  };
}

export const LOG_LEVELS = Object.freeze(['debug', 'info', 'warn', 'error'] as const);
export type LogLevel = (typeof LOG_LEVELS)[number];

/** A log line as a worker sends it. */
export interface LogLine {
  id: string;
  level: LogLevel;
  message: string;
  trace_id?: string | null;
  /** When it was logged (the worker's clock); the plane's when left out. */
  at?: number | null;
}

export type FeedRecord = JobRecord | WorkerRecord | LogRecord;

/** The most lines one call sends, and the longest message kept (a longer one is cut, marked with …). */
export const MAX_LOG_LINES = 100;
export const MAX_LOG_MESSAGE = 4096;

/** Checks a worker's log lines (both planes): a bad one refuses the call, naming it. */
export function logLines(raw: unknown, limits: Limits): LogLine[] {
  if (!Array.isArray(raw)) throw badRequest('lines must be an array of {id, level, message, trace_id?, at?}');
  if (raw.length > MAX_LOG_LINES) throw badRequest(`at most ${MAX_LOG_LINES} log lines per call (got ${raw.length})`);
  return raw.map((l: Record<string, unknown>, i) => {
    const at = `lines[${i}]`;
    if (typeof l !== 'object' || l === null) throw badRequest(`${at} must be an object`);
    if (!(LOG_LEVELS as readonly unknown[]).includes(l.level)) throw badRequest(`${at}.level must be one of ${LOG_LEVELS.join(', ')}`);
    if (typeof l.message !== 'string') throw badRequest(`${at}.message must be a string`);
    if (l.trace_id != null && !(typeof l.trace_id === 'string' && /^[0-9a-f]{32}$/.test(l.trace_id)))
      throw badRequest(`${at}.trace_id must be 32 lowercase hex digits`);
    if (l.at != null && !(typeof l.at === 'number' && Number.isFinite(l.at) && l.at >= 0))
      throw badRequest(`${at}.at must be a time in ms`);
    const message = l.message.length > MAX_LOG_MESSAGE ? `${l.message.slice(0, MAX_LOG_MESSAGE - 1)}…` : l.message;
    return {
      id: v.id(l.id, limits),
      level: l.level as LogLevel,
      message,
      trace_id: (l.trace_id as string | null | undefined) ?? null,
      at: (l.at as number | null | undefined) ?? null,
    };
  });
}

/** The counters kept per queue, by the transitions they count. */
export const COUNTERS = Object.freeze(['submitted', 'claimed', 'succeeded', 'failed', 'retried', 'expired', 'cancelled'] as const);
export type Counter = (typeof COUNTERS)[number];

const COUNTED: Partial<Record<JobStatus, Counter>> = {
  running: 'claimed',
  succeeded: 'succeeded',
  failed: 'failed',
  retrying: 'retried',
  expired: 'expired',
  cancelled: 'cancelled',
};

export type Listener = (ns: string, records: FeedRecord[]) => void;

/** Jobs whose trace id the feed remembers for their later records (while anyone listens). */
export const TRACES = 10_000;
/**
 * The trace id of an envelope's traceparent (docs/envelope.md), if it has one: the first
 * `"traceparent": "00-<32 hex>-<16 hex>-<2 hex>"` among its bytes, JSON whitespace allowed around
 * the colon. Every job's record reads it (it is on the path of every transition a feed tells), and
 * every envelope the clients make has the key, most with `null`: so it is read from the bytes, with
 * no decoding and no regular expression, hopping from quote to quote.
 */
export function traceIdOf(envelope: Uint8Array): string | null {
  const end = envelope.length - KEY.length;
  for (let i = envelope.indexOf(0x22); i !== -1 && i <= end; i = envelope.indexOf(0x22, i + 1)) {
    let k = 1;
    while (k < KEY.length && envelope[i + k] === KEY[k]) k++;
    if (k < KEY.length) continue;
    let at = i + KEY.length;
    while (jsonSpace(envelope[at])) at++;
    if (envelope[at] !== 0x3a) continue;
    at++;
    while (jsonSpace(envelope[at])) at++;
    if (
      envelope[at] === 0x22 &&
      envelope[at + 1] === 0x30 &&
      envelope[at + 2] === 0x30 &&
      envelope[at + 3] === 0x2d &&
      hex(envelope, at + 4, 32) &&
      envelope[at + 36] === 0x2d &&
      hex(envelope, at + 37, 16) &&
      envelope[at + 53] === 0x2d &&
      hex(envelope, at + 54, 2) &&
      envelope[at + 56] === 0x22
    )
      return ascii.decode(envelope.subarray(at + 4, at + 36));
  }
  return null;
}

const ascii = new TextDecoder();
const jsonSpace = (b: number | undefined) => b === 0x20 || b === 0x09 || b === 0x0a || b === 0x0d;

/** `n` lowercase hex digits from `at`. */
function hex(bytes: Uint8Array, at: number, n: number): boolean {
  for (let k = at; k < at + n; k++) {
    const b = bytes[k]!;
    if (!((b >= 0x30 && b <= 0x39) || (b >= 0x61 && b <= 0x66))) return false;
  }
  return true;
}

const KEY = new TextEncoder().encode('"traceparent"');

/**
 * The recent throughput kept per queue: jobs finished per RECENT_BUCKET_MS, the last
 * RECENT_BUCKETS of them (5 minutes), succeeded and failed (a TTL's expiry is a failure), in
 * memory beside the counters: a restart starts it empty.
 */
export const RECENT_BUCKET_MS = 10_000;
export const RECENT_BUCKETS = 30;

/** Jobs that succeeded and failed per bucket, oldest first; the last bucket is the one ending at `until` (still filling). */
export interface Recent {
  bucketMs: number;
  until: number;
  succeeded: number[];
  failed: number[];
}

interface Ring {
  /** The bucket number (time / RECENT_BUCKET_MS) of the last slot. */
  slot: number;
  succeeded: number[];
  failed: number[];
}

export class Feed {
  private readonly listeners = new Set<Listener>();
  private readonly counts = new Map<string, Record<Counter, number>>();
  private readonly rings = new Map<string, Ring>();
  /** When these counters started (they live in memory: a restart starts them again at 0). */
  readonly since: number;
  private readonly now: () => number;

  constructor(now: () => number) {
    this.now = now;
    this.since = now();
  }

  /** Whether anyone listens: callers skip making records when not. */
  get listening(): boolean {
    return this.listeners.size > 0;
  }

  /** Listens until the returned function is called. */
  on(listener: Listener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Counts `n` transitions of `queue`. */
  count(ns: string, queue: string, counter: Counter, n = 1): void {
    if (n > 0) this.of(ns, queue)[counter] += n;
  }

  /** The counters of one queue (the last one asked for is remembered: calls come in runs). */
  private last: { ns: string; queue: string; c: Record<Counter, number> } | null = null;
  private of(ns: string, queue: string): Record<Counter, number> {
    if (this.last && this.last.ns === ns && this.last.queue === queue) return this.last.c;
    const key = `${ns}\u0000${queue}`;
    let c = this.counts.get(key);
    if (!c) this.counts.set(key, (c = Object.fromEntries(COUNTERS.map((k) => [k, 0])) as Record<Counter, number>));
    this.last = { ns, queue, c };
    return c;
  }

  /** The counters of `queue`, or of every queue of `ns`. */
  counters(ns: string, queue?: string): { queue: string; counts: Record<Counter, number> }[] {
    const out: { queue: string; counts: Record<Counter, number> }[] = [];
    for (const [key, counts] of this.counts) {
      const [n, q] = key.split('\u0000') as [string, string];
      if (n === ns && (queue === undefined || q === queue)) out.push({ queue: q, counts: { ...counts } });
    }
    return out;
  }

  /** The jobs of `queue` that finished lately, per bucket (what a dashboard's sparkline starts from). */
  recent(ns: string, queue: string): Recent {
    const now = this.now();
    const ring = this.rings.has(`${ns}\u0000${queue}`) ? this.ring(ns, queue, now) : null;
    const zeros = () => new Array<number>(RECENT_BUCKETS).fill(0);
    return {
      bucketMs: RECENT_BUCKET_MS,
      until: (Math.floor(now / RECENT_BUCKET_MS) + 1) * RECENT_BUCKET_MS,
      succeeded: ring ? [...ring.succeeded] : zeros(),
      failed: ring ? [...ring.failed] : zeros(),
    };
  }

  /** The ring of `queue`, rolled forward to the bucket of `now`. */
  private ring(ns: string, queue: string, now: number): Ring {
    const key = `${ns}\u0000${queue}`;
    const slot = Math.floor(now / RECENT_BUCKET_MS);
    let r = this.rings.get(key);
    if (!r)
      this.rings.set(
        key,
        (r = { slot, succeeded: new Array<number>(RECENT_BUCKETS).fill(0), failed: new Array<number>(RECENT_BUCKETS).fill(0) }),
      );
    const shift = Math.min(slot - r.slot, RECENT_BUCKETS);
    if (shift > 0) {
      for (const a of [r.succeeded, r.failed]) {
        a.splice(0, shift);
        for (let i = 0; i < shift; i++) a.push(0);
      }
      r.slot = slot;
    }
    return r;
  }

  /**
   * Transitions that committed: counted always; told as records to the listeners (made only when
   * there are some). `submitted` counts submits, which are told with the state they entered.
   */
  told(
    ns: string,
    queue: string,
    items: {
      id: string;
      status: JobStatus;
      attempt?: number | null;
      workerId?: string | null;
      error?: InvocationError | null;
      submitted?: boolean;
      envelope?: Uint8Array;
    }[],
  ): void {
    if (!items.length) return;
    const c = this.of(ns, queue);
    let done = 0;
    let failed = 0;
    for (const it of items) {
      const counter = it.submitted ? 'submitted' : COUNTED[it.status];
      if (counter) c[counter]++;
      if (counter === 'succeeded') done++;
      else if (counter === 'failed' || counter === 'expired') failed++;
    }
    const at = done || failed || this.listeners.size ? this.now() : 0;
    if (done || failed) {
      const ring = this.ring(ns, queue, at);
      ring.succeeded[RECENT_BUCKETS - 1]! += done;
      ring.failed[RECENT_BUCKETS - 1]! += failed;
    }
    if (!this.listeners.size) return;
    const records = items.map((it): JobRecord => {
      const traceId = this.traceOf(ns, it.id, it.status, it.envelope);
      // Most records have neither an error nor a trace: made as one literal, with no spreading.
      if (!it.error && !traceId)
        return { kind: 'job', id: it.id, queue, status: it.status, attempt: it.attempt ?? null, worker_id: it.workerId ?? null, at };
      return {
        kind: 'job',
        id: it.id,
        queue,
        status: it.status,
        attempt: it.attempt ?? null,
        worker_id: it.workerId ?? null,
        ...(it.error ? { error: feedError(it.error) } : {}),
        ...(traceId ? { trace_id: traceId } : {}),
        at,
      };
    });
    this.tell(ns, records);
  }

  /**
   * The trace a job's record belongs to: read from its envelope's traceparent where the record has
   * it (a submit, a claim), else remembered from one (the last TRACES jobs, only while anyone
   * listens; forgotten when the job ends).
   */
  private readonly traces = new Map<string, string>();
  private traceOf(ns: string, id: string, status: JobStatus, envelope: Uint8Array | undefined): string | null {
    let t = envelope ? traceIdOf(envelope) : null;
    // No trace here and none remembered: nothing to look up or forget (the usual case untraced).
    if (!t && !this.traces.size) return null;
    const key = `${ns}\u0000${id}`;
    if (t) {
      this.traces.delete(key);
      this.traces.set(key, t);
      if (this.traces.size > TRACES) this.traces.delete(this.traces.keys().next().value!);
    } else t = this.traces.get(key) ?? null;
    if (status === 'succeeded' || status === 'failed' || status === 'cancelled' || status === 'expired') this.traces.delete(key);
    return t;
  }

  /** Log lines of a worker's jobs, to the listeners (none kept, none made while nobody listens). */
  toldLog(ns: string, queue: string, workerId: string, lines: LogLine[]): void {
    if (!this.listeners.size || !lines.length) return;
    const now = this.now();
    this.tell(
      ns,
      lines.map(
        (l): LogRecord => ({
          kind: 'worker',
          worker_id: workerId,
          queue,
          id: l.id,
          level: l.level,
          message: l.message,
          ...(l.trace_id ? { trace_id: l.trace_id } : {}),
          at: l.at ?? now,
        }),
      ),
    );
  }

  /** A worker record (durable/workers.ts), to the listeners. */
  toldWorker(ns: string, record: WorkerRecord): void {
    if (this.listeners.size) this.tell(ns, [record]);
  }

  private tell(ns: string, records: FeedRecord[]): void {
    for (const l of this.listeners) {
      try {
        l(ns, records);
      } catch {
        /* never load-bearing */
      }
    }
  }
}
