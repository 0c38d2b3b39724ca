/**
 * Runs one claimed invocation: decode, resolve, call, then journal and ack or nack. While it runs,
 * heartbeats extend the lease and report cancellation; a time limit aborts it.
 */
import { stackOf } from './stack.ts';
import { runSpan } from '../tracing.ts';
import { FrameKind } from '../../src/core/frame.ts';
import type { Claimed } from '../../src/core/types.ts';
import type { LogLevel } from '../../src/core/feed.ts';
import { decodeEnvelope, jsonBytes, type Envelope } from '../envelope.ts';
import { FencingConflictError, NotFoundError, PayloadTooLargeError } from '../errors.ts';
import type { DispatchPlane } from '../types.ts';
import { ChunkWriter } from './chunks.ts';
import { runInJob } from './context.ts';
import type { CancelWatch } from './cancel-watch.ts';
import type { JobClock } from './job-clock.ts';
import type { LogShipper } from './logs.ts';
import type { Mounts } from './mount.ts';
import { ResolveError, resolveHandler, type Registry } from './resolve.ts';

export interface JobOptions {
  dispatch: DispatchPlane;
  /** Sends the ack of a finished job (the worker sends it with its next claim when it can). */
  ack: (c: Claimed, result: Uint8Array) => Promise<void>;
  workerId: string;
  registry: Registry;
  root: string;
  allowImport: boolean;
  /**
   * A lower cap on retries: a failure is retried while attempt <= retries (and <= the envelope's
   * max_retries). Infinity leaves it to the plane, which fails the job once its attempt budget is spent.
   */
  retries: number;
  /** The worker's own time limit (ms; null: none), for a job neither its envelope nor its queue limits. */
  timeLimitMs: number | null;
  /** Whether that is the default (600 s), not one the worker was given: a job past it is told how to set one. */
  timeLimitIsDefault?: boolean;
  /** A queue's time limit (its `time_limit_ms` setting), as the worker last read it; null: none set. */
  queueTimeLimitMs?: (queue: string) => number | null;
  /** The worker's one timer: each running job's heartbeats and time limit. */
  clock: JobClock;
  /** Hears a running job's cancel as it happens (cancel-watch.ts); without it, at its next heartbeat. */
  cancels?: CancelWatch;
  leaseMs: number | null;
  /** Sees each job's outcome; for a failure, 'handled' fails it without a retry (runWorker's onDone). */
  onDone?: OnDone;
  /** The worker's hard stop after its grace period: aborts every running job. */
  hardStop: HardStop;
  log: (msg: string) => void;
  /** Where the handlers' currentJob().log lines go (stderr and the feed). */
  logs: LogShipper;
  /** The pushed-code cache, when this worker runs pushed code (runWorker's code: 'mount'). */
  mounts?: Mounts | null;
}

export type JobOutcome = 'succeeded' | 'failed' | 'retried' | 'cancelled' | 'lost';

/**
 * The worker's hard stop, one listener for all its jobs: each running job registers its abort
 * here (a listener per job on an AbortSignal cost a worker ~5 µs a job, most of its event-target time).
 */
export class HardStop {
  private readonly jobs = new Set<() => void>();
  stopped = false;

  /** Aborts every registered job now and any job registered from now on. */
  stop(): void {
    this.stopped = true;
    for (const f of this.jobs) f();
  }

  /** Runs `f` at the stop (at once if it has come); answers how to take it back. */
  add(f: () => void): () => void {
    if (this.stopped) f();
    this.jobs.add(f);
    return () => this.jobs.delete(f);
  }
}

class Abort extends Error {
  readonly why: 'cancelled' | 'time_limit' | 'lost' | 'shutdown';
  constructor(why: 'cancelled' | 'time_limit' | 'lost' | 'shutdown', message: string) {
    super(message);
    this.name = why === 'time_limit' ? 'TimeLimitExceeded' : 'Aborted';
    this.why = why;
  }
}

const isIterator = (v: unknown): v is AsyncIterator<unknown> | Iterator<unknown> =>
  !!v &&
  typeof v === 'object' &&
  typeof (v as Iterator<unknown>).next === 'function' &&
  (Symbol.asyncIterator in v || Symbol.iterator in v);

/**
 * `handlerDone` is called once the handler has settled, before the ack or nack goes out: the
 * worker may start its next job while the answer is in flight (the lease is kept until it lands).
 */
/** A job as onDone sees it. */
export interface DoneJob {
  id: string;
  queue: string;
  attempt: number;
  fn: string | null;
  origin: string | null;
}

/** runWorker's onDone: sees each outcome; answering 'handled' to a failure fails the job without a retry. */
export type OnDone = (
  job: DoneJob,
  outcome: { state: 'succeeded'; result: unknown } | { state: 'failed'; error: Error },
) => 'handled' | undefined | Promise<'handled' | undefined>;

const jobOf = (c: Claimed, env: Envelope | null): DoneJob => ({
  id: c.id,
  queue: c.queue,
  attempt: c.attempt,
  fn: env?.fn ?? null,
  origin: env?.origin ?? null,
});

/** Tells onDone an outcome; what it answers (undefined when it threw or there is none). */
const tell = (onDone: OnDone | undefined, c: Claimed, env: Envelope | null, outcome: Parameters<OnDone>[1]) =>
  onDone
    ? Promise.resolve()
        .then(() => onDone(jobOf(c, env), outcome))
        .catch(() => undefined)
    : undefined;

export async function runJob(c: Claimed, o: JobOptions, handlerDone: () => void = () => {}): Promise<JobOutcome> {
  const { dispatch: d, workerId } = o;
  const holder = { attempt: c.attempt };
  // The handler runs until it settles or the job is aborted, whichever comes first. The job's
  // AbortSignal is made when the handler first reads it, and the promise that tells the abort only
  // for a handler that returns one: most jobs need neither, and a worker's cost a job is mostly
  // what it allocates.
  let why: Abort | null = null;
  let ac: AbortController | null = null;
  const signal = (): AbortSignal => {
    if (!ac) {
      ac = new AbortController();
      if (why) ac.abort(why);
    }
    return ac.signal;
  };
  let rejectAborted: ((e: unknown) => void) | null = null;
  let abortedP: Promise<never> | null = null;
  const aborted = (): Promise<never> => {
    if (!abortedP) {
      abortedP = why ? Promise.reject(why) : new Promise<never>((_, reject) => (rejectAborted = reject));
      abortedP.catch(() => {});
    }
    return abortedP;
  };
  const abort = (kind: Abort['why'], msg: string) => {
    if (why) return;
    why = new Abort(kind, msg);
    ac?.abort(why);
    rejectAborted?.(why);
  };
  const offHardStop = o.hardStop.add(() => abort('shutdown', 'the worker is shutting down'));
  let env: Envelope | null = null;
  // The journal's writers, made on the first frame or chunk: most jobs write neither.
  let journal = null as ReturnType<typeof journalWriters> | null;
  const journalOf = () => (journal ??= journalWriters(d, c, workerId));

  // One heartbeat at a time: while the plane is away a heartbeat waits for it (the client retries),
  // and the next ones are skipped rather than piled up behind it.
  let beating = false;
  const beat = async () => {
    if (beating) return;
    beating = true;
    try {
      const hb = await d.heartbeat(c.id, workerId, { ...holder, leaseMs: o.leaseMs ?? undefined });
      if (hb.cancelled) abort('cancelled', 'the invocation was cancelled');
    } catch (e) {
      if (e instanceof FencingConflictError || e instanceof NotFoundError)
        abort('lost', 'its lease was lost (it ran out, or the job went to another worker)');
    } finally {
      beating = false;
    }
  };
  let unwatch: (() => void) | null = null;
  let unhear: (() => void) | null = null;
  let span: ReturnType<typeof runSpan> | null = null;

  try {
    env = decodeEnvelope(c.envelope);
    // The job's own limit, else its queue's, else the worker's (contract, "Time limits").
    const [maxMs, whose] = limitOf(env.time_limit_ms, o.queueTimeLimitMs?.(c.queue), o.timeLimitMs, o.timeLimitIsDefault);
    unwatch = o.clock.watch(beat, () => abort('time_limit', `the job ran past its time limit of ${maxMs} ms, ${whose}`), maxMs || null);
    unhear = o.cancels?.watch(c.queue, c.id, () => abort('cancelled', 'the invocation was cancelled')) ?? null;
    // Awaited even when the registry has it: a handler that returns at once frees its slot, and
    // the next job starts, a turn later (run-worker.ts), not inside this call.
    const fn = await resolveHandler(env, o);
    const args = Object.keys(env.kwargs).length ? [...env.args, env.kwargs] : env.args;
    // The job runs in a CONSUMER span `run <fn>`, child of its submitter's (tracing.ts).
    span = runSpan(env.fn, env.traceparent, { id: c.id, queue: c.queue, attempt: c.attempt });
    const traceId = span.traceId;
    const ctx = {
      id: c.id,
      queue: c.queue,
      attempt: c.attempt,
      get signal() {
        return signal();
      },
      kwargs: env.kwargs,
      traceparent: env.traceparent,
      origin: env.origin,
      write: (data: string | Uint8Array) => journalOf().chunks.write(data),
      log: (message: unknown, level: LogLevel = 'info') =>
        o.logs.log(c.queue, c.id, level, typeof message === 'string' ? message : String(message), traceId),
    };
    const inSpan = span.within;
    // A handler that returns at once, before any abort, is taken as it is; any other is raced with the abort.
    const now = inSpan(() => runInJob(ctx, () => fn(...args)));
    const out = isThenable(now) || why ? await Promise.race([now, aborted()]) : now;
    let result: unknown = out;
    // The result's bytes, made before anything says the job ended: a result JSON cannot write
    // (a BigInt, a cycle) fails the job here, as the handler's error, rather than after its
    // stream ended or as an ack that never goes.
    let body: Uint8Array | null = null;
    if (isIterator(out)) {
      const { append } = journalOf();
      await append(FrameKind.BEGIN, new Uint8Array(), { attempt: c.attempt });
      const it = out as AsyncIterator<unknown>;
      for (;;) {
        const step = await Promise.race([inSpan(() => runInJob(ctx, () => it.next())), aborted()]);
        if (step.done) {
          result = step.value;
          body = asJson(result, 'result');
          break;
        }
        await append(FrameKind.VALUE, asJson(step.value, 'a value it yielded'));
      }
      await append(FrameKind.END, new Uint8Array(), null, true);
    }
    body ??= asJson(result, 'result');
    if (journal) await journal.chunks.flush();
    handlerDone();
    span.end();
    try {
      await o.ack(c, body);
    } catch (e) {
      // A result larger than the plane takes: the job is still this worker's, and another attempt
      // would run the handler again (for hours, perhaps) to answer the same. Failed now, saying so.
      if (e instanceof PayloadTooLargeError) {
        const error = {
          type: 'PayloadTooLarge',
          message: `the handler's result is too large for the plane: ${e.message} (a large output belongs in storage of its own, its address in the result)`,
        };
        // onDone hears the outcome the job has: failed, not the success the handler returned.
        await tell(o.onDone, c, env, { state: 'failed', error: new PayloadTooLargeError(error.message) });
        try {
          await d.nack(c.id, workerId, { ...holder, error, retry: false });
          o.log(`job ${c.id} attempt ${c.attempt} failed: ${error.message}; not retried`);
          return 'failed';
        } catch {
          // no longer this worker's: as below
        }
      }
      // The handler succeeded; only its ack did not land (its lease ran out, say while the plane
      // was away, and the job is another attempt's now). Nothing to nack: the row decides.
      o.log(`job ${c.id} attempt ${c.attempt}: lost: its result was refused (${e instanceof Error ? e.message : String(e)})`);
      return 'lost';
    }
    // Told once the plane has the result, so what onDone hears is the job's state: a result the
    // plane refused is heard as the failure it became, a lost ack not at all (another attempt's).
    await tell(o.onDone, c, env, { state: 'succeeded', result });
    return 'succeeded';
  } catch (e) {
    handlerDone();
    const err = e instanceof Error ? e : new Error(thrownText(e));
    if (err instanceof Abort && (err.why === 'cancelled' || err.why === 'lost')) {
      o.log(`job ${c.id} attempt ${c.attempt}: ${err.why === 'cancelled' ? 'cancelled' : 'lost'}: ${err.message}; stopped`);
      return err.why === 'cancelled' ? 'cancelled' : 'lost';
    }
    // A write of the job refused as no longer this worker's (an append, say, before a heartbeat
    // noticed): the job was cancelled or went to another attempt. Not a failure of the handler.
    if (err instanceof FencingConflictError || err instanceof NotFoundError) {
      const now = await d.get(c.id).catch(() => null);
      const cancelled = now?.state === 'cancelled';
      o.log(
        `job ${c.id} attempt ${c.attempt}: ${cancelled ? 'cancelled' : 'lost: its lease ran out or the job went to another worker'}; stopped`,
      );
      return cancelled ? 'cancelled' : 'lost';
    }
    // The worker may only lower the plane's attempt budget: with retry, the plane says whether one is
    // left. A job it cannot start (no such function, an import refused) would fail the same way again.
    span?.end(err);
    // The application may record a failure as a fact rather than have it retried (onDone: 'handled').
    const verdict = await tell(o.onDone, c, env, { state: 'failed', error: err });
    // Would fail the same again: no handler to find, an answer JSON cannot write, a value larger than the plane takes.
    const once = err instanceof ResolveError || err instanceof NotJsonError || err instanceof PayloadTooLargeError;
    // Counted in the job's current budget: an operator's retry starts it afresh, and a claim put
    // back uncharged took none of it (the attempt number counts both).
    const retry = verdict !== 'handled' && !once && c.budgetAttempt <= Math.min(o.retries, env?.max_retries ?? Infinity);
    const error = { message: err.message, type: err.name, stack: stackOf(err.stack) };
    const failedWith = `job ${c.id} attempt ${c.attempt} failed: ${err.name}: ${err.message}`;
    try {
      await journalOf().append(FrameKind.ERROR, jsonBytes(error), { attempt: c.attempt }, !retry);
      // The worker's budget (retries + 1) rules where neither the job nor its queue sets one.
      const cap = Math.min(o.retries, env?.max_retries ?? Infinity);
      const state = await d.nack(c.id, workerId, { ...holder, error, retry, maxAttempts: Number.isFinite(cap) ? cap + 1 : undefined });
      // Said once the plane has said where the job went.
      o.log(`${failedWith}; ${state === 'failed' ? (retry ? 'no attempts left' : 'not retried') : `it will be retried (${state})`}`);
      return state === 'failed' ? 'failed' : 'retried';
    } catch (e2) {
      if (e2 instanceof FencingConflictError || e2 instanceof NotFoundError) {
        o.log(`${failedWith}; lost: no longer this worker's (cancelled, or its lease ran out)`);
        return 'lost';
      }
      throw e2;
    }
  } finally {
    unwatch?.();
    unhear?.();
    offHardStop();
  }
}

/** A job's time limit and whose it is, as a job past it is told: its own, its queue's, its worker's, or the default. */
export function limitOf(
  own: number | null | undefined,
  queue: number | null | undefined,
  worker: number | null,
  isDefault = false,
): [number | null, string] {
  if (own !== null && own !== undefined) return [own, "the job's own"];
  if (queue !== null && queue !== undefined) return [queue, "its queue's"];
  return isDefault
    ? [
        worker,
        `the default (a job sets its own with time_limit_ms, a queue with its time_limit_ms setting, a worker with --time-limit-ms; 0 is none)`,
      ]
    : [worker, "its worker's"];
}

/**
 * A result or yielded value JSON cannot write: the handler's TypeError, and not retried. The
 * handler ran, perhaps for hours, and answered what no reader can take; it would again.
 */
class NotJsonError extends TypeError {}

/** A handler's result or yielded value as JSON bytes; a value JSON cannot write is a NotJsonError (a TypeError). */
function asJson(v: unknown, what: string): Uint8Array {
  try {
    return jsonBytes(v);
  } catch (e) {
    throw new NotJsonError(`the handler's ${what} is not JSON: ${e instanceof Error ? e.message : String(e)}`);
  }
}

/** What a thrown value that is not an Error says: a string as it is, anything else as JSON where it can be. */
function thrownText(e: unknown): string {
  if (typeof e === 'string') return e;
  try {
    return `a non-Error was thrown: ${JSON.stringify(e) ?? String(e)}`;
  } catch {
    return `a non-Error was thrown: ${String(e)}`;
  }
}

const isThenable = <T>(v: T | PromiseLike<T>): v is PromiseLike<T> =>
  !!v && (typeof v === 'object' || typeof v === 'function') && typeof (v as PromiseLike<T>).then === 'function';

/**
 * A job's journal writers: appends go out one at a time, in order (seq numbers follow the order
 * frames were written), and any frame comes after the chunks written before it.
 */
function journalWriters(d: DispatchPlane, c: Claimed, workerId: string) {
  let seq: number | null = null;
  let tail: Promise<unknown> = Promise.resolve();
  const appendNow = (kind: number, body: Uint8Array, meta: Record<string, unknown> | null = null, final?: boolean): Promise<void> => {
    const next = tail.then(async () => {
      if (seq === null)
        seq = await d.journalAppend(c.id, null, { kind: kind as 0, seq: 0, body, meta }, { workerId, attempt: c.attempt, final });
      else await d.journalAppend(c.id, ++seq, { kind: kind as 0, seq, body, meta }, { workerId, attempt: c.attempt, final });
    });
    tail = next.catch(() => {});
    return next;
  };
  const chunks = new ChunkWriter((body) => appendNow(FrameKind.CHUNK, body));
  const append = async (kind: number, body: Uint8Array, meta: Record<string, unknown> | null = null, final?: boolean) => {
    await chunks.flush();
    await appendNow(kind, body, meta, final);
  };
  return { chunks, append };
}
