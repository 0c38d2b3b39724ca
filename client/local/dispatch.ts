/**
 * Dispatch: the local plane. The same contract as HttpDispatch, executed in this process on
 * SQLite (node:sqlite) by the same engine and the same SQL the edge plane runs on D1.
 *
 * Several processes may share one file: transitions serialize on SQLite's write lock, and a
 * cheap `PRAGMA data_version` check wakes this process's waiters when another process commits.
 *
 * @example
 * const d = new Dispatch('./jobs.sqlite', { namespace: 'default' });
 * await d.submit('cpu', new TextEncoder().encode('{}'), { id: 'job-1' });
 */
import { checkClaimOptions, checkNackOptions, checkSubmitOptions } from '../check-options.ts';
import { decodeFrame } from '../../src/core/frame.ts';
import type { State } from '../../src/core/states.ts';
import type { Claimed, Frame, HeartbeatAnswer, Invocation, JournalFrame, JournalPage } from '../../src/core/types.ts';
import { Batcher } from '../batcher.ts';
import { BadRequestError, endedOf, errorFor, InvocationCancelledError, InvocationFailedError, TimeoutError } from '../errors.ts';
import type {
  AckRequest,
  AppendOptions,
  ClaimOptions,
  DispatchPlane,
  Ended,
  HolderOptions,
  NackOptions,
  NackedState,
  ReadOptions,
  SubmitOptions,
} from '../types.ts';
import { openLocal, type DispatchOptions } from './open.ts';
import { LocalOperators, verb } from './operators.ts';
import { HeldClaims } from '../held-claims.ts';

export type { DispatchOptions } from './open.ts';

export class Dispatch extends LocalOperators implements DispatchPlane {
  readonly path: string;
  readonly inProcess = true;
  /** The claims made through this client, so a holder's calls are fenced without the caller repeating the attempt. */
  private readonly claims = new HeldClaims();
  private closed = false;
  private readonly submitters = new Map<string, Batcher<{ envelope: Uint8Array; opts: SubmitOptions }, string>>();
  private readonly acker = new Batcher<{ id: string; workerId: string; attempt: number | null; result: Uint8Array | null }, undefined>(
    async (items) => {
      const out = await verb(this.engine.work.ackMany(this.namespace, items));
      return out.map((r) =>
        r.ok ? { ok: true as const, value: undefined } : { ok: false as const, error: errorFor(r.error.code, r.error.message) },
      );
    },
  );

  constructor(path = ':memory:', opts: DispatchOptions = {}) {
    super(openLocal(path, opts));
    this.path = path;
  }

  // ------------------------------------------------------------ producers

  /** Concurrent submits to a queue go to the engine together, as one set-based INSERT. */
  submit(queue: string, envelope: Uint8Array, opts: SubmitOptions): Promise<string> {
    // An options object with a key submit does not take is refused (no object at all: the engine says the id is missing).
    if (typeof opts === 'object' && opts !== null)
      try {
        checkSubmitOptions(opts);
      } catch (e) {
        return Promise.reject(e);
      }
    let b = this.submitters.get(queue);
    if (!b) {
      b = new Batcher(async (items) => {
        const out = await verb(
          this.engine.submitMany(
            this.namespace,
            queue,
            items.map(({ envelope: e, opts: o }) => ({ ...o, envelope: e })),
          ),
        );
        return out.map((r) =>
          r.ok ? { ok: true as const, value: r.value.id } : { ok: false as const, error: errorFor(r.error.code, r.error.message) },
        );
      });
      this.submitters.set(queue, b);
    }
    return b.add({ envelope, opts });
  }

  async submitMany(queue: string, items: { envelope: Uint8Array; opts: SubmitOptions }[]): Promise<({ id: string } | { error: Error })[]> {
    for (const it of items) if (typeof it?.opts === 'object' && it.opts !== null) checkSubmitOptions(it.opts);
    const out = await verb(
      this.engine.submitMany(
        this.namespace,
        queue,
        items.map(({ envelope, opts }) => ({ ...opts, envelope })),
      ),
    );
    return out.map((r) => (r.ok ? { id: r.value.id } : { error: errorFor(r.error.code, r.error.message) }));
  }

  cancel(id: string): Promise<boolean> {
    return verb(this.engine.cancel(this.namespace, id));
  }

  get(id: string): Promise<Invocation | null> {
    return verb(this.engine.get(this.namespace, id));
  }

  async result(id: string, opts: { timeoutMs?: number; signal?: AbortSignal } = {}): Promise<Uint8Array | null> {
    const timeoutMs = opts.timeoutMs ?? 30_000;
    if (!(timeoutMs >= 0)) throw new BadRequestError('timeout must not be negative');
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      // Waits longer than the plane's limit are made of several.
      const slice = Math.max(0, Math.min(deadline - Date.now(), this.engine.limits.maxResultWaitMs));
      const out = await this.clocks.waiting(() => verb(this.engine.result(this.namespace, id, slice, opts.signal)));
      if (out.state === 'succeeded') return out.result;
      if (out.state === 'failed') throw new InvocationFailedError(id, out.error);
      if (out.state === 'cancelled') throw new InvocationCancelledError(id);
      if (Date.now() >= deadline || opts.signal?.aborted)
        throw new TimeoutError(`invocation ${id} is still ${out.state} after ${timeoutMs} ms`);
    }
  }

  async results(queue: string, ids: string[], opts: { timeoutMs?: number; signal?: AbortSignal } = {}): Promise<Ended[]> {
    const { ended } = await this.clocks.waiting(() =>
      verb(this.engine.results(this.namespace, queue, ids, opts.timeoutMs ?? 30_000, opts.signal)),
    );
    return ended.map((e) =>
      'error' in e ? { id: e.id, ok: false, error: errorFor(e.error.code, e.error.message) } : endedOf(e.id, e.outcome),
    );
  }

  count(queue: string, state: State = 'queued'): Promise<number> {
    return verb(this.engine.count(this.namespace, queue, state));
  }

  listQueues(): Promise<string[]> {
    return verb(this.engine.queues(this.namespace));
  }

  retry(id: string): Promise<void> {
    return verb(this.engine.retry(this.namespace, id));
  }

  delete(id: string): Promise<void> {
    return verb(this.engine.delete(this.namespace, id));
  }

  // ------------------------------------------------------------ workers

  async claim(queue: string, workerId: string, opts: ClaimOptions = {}): Promise<Claimed | null> {
    const [c] = await this.claimMany(queue, workerId, 1, opts);
    return c ?? null;
  }

  async claimMany(queue: string, workerId: string, max: number, opts: ClaimOptions = {}): Promise<Claimed[]> {
    checkClaimOptions(opts);
    this.workersSeen.heard(queue, workerId, opts.worker);
    if (opts.waitMs) void this.clocks.watchQueue(this.namespace, queue).catch(() => {});
    const got = await this.clocks.waiting(() =>
      verb(
        this.engine.work.claimMany(this.namespace, queue, {
          workerId,
          kind: opts.kind,
          temperature: opts.temperature,
          leaseMs: opts.leaseMs,
          waitMs: opts.waitMs ?? 0,
          max,
          signal: opts.signal,
        }),
      ),
    );
    for (const c of got) this.claims.held(c.id, workerId, c.attempt);
    return got;
  }

  async ackAndClaim(
    queue: string,
    workerId: string,
    acks: AckRequest[],
    max: number,
    opts: ClaimOptions = {},
  ): Promise<{ acks: (Error | null)[]; claimed: Claimed[] }> {
    checkClaimOptions(opts);
    this.workersSeen.heard(queue, workerId, opts.worker);
    const items = acks.map((a) => ({
      id: a.id,
      workerId,
      attempt: this.claims.attemptOf(a.id, workerId, a.attempt),
      result: a.result ?? null,
    }));
    const out = await this.clocks.waiting(() =>
      verb(
        this.engine.work.ackAndClaim(this.namespace, queue, items, {
          workerId,
          kind: opts.kind,
          temperature: opts.temperature,
          leaseMs: opts.leaseMs,
          waitMs: opts.waitMs ?? 0,
          max,
        }),
      ),
    );
    out.acks.forEach((r, i) => {
      if (r.ok) this.claims.done(items[i]!.id, workerId, items[i]!.attempt);
    });
    for (const c of out.claimed) this.claims.held(c.id, workerId, c.attempt);
    return { claimed: out.claimed, acks: out.acks.map((r) => (r.ok ? null : errorFor(r.error.code, r.error.message))) };
  }

  async release(queue: string, workerId: string, items: { id: string; attempt?: number }[]): Promise<string[]> {
    this.workersSeen.touch(workerId);
    const handed = items.map((it) => ({ id: it.id, attempt: this.claims.attemptOf(it.id, workerId, it.attempt) }));
    const back = await verb(this.engine.work.giveBack(this.namespace, queue, workerId, handed));
    const released = new Set(back);
    for (const it of handed) if (released.has(it.id)) this.claims.done(it.id, workerId, it.attempt);
    return back;
  }

  /** Concurrent acks go to the engine together, as one fenced UPDATE; each keeps its own answer. */
  async ack(id: string, workerId: string, opts: HolderOptions & { result?: Uint8Array | null } = {}): Promise<void> {
    this.workersSeen.touch(workerId);
    const attempt = this.claims.attemptOf(id, workerId, opts.attempt);
    await this.acker.add({ id, workerId, attempt, result: opts.result ?? null });
    this.claims.done(id, workerId, attempt);
  }

  async nack(id: string, workerId: string, opts: NackOptions): Promise<NackedState> {
    checkNackOptions(opts);
    this.workersSeen.touch(workerId);
    const attempt = this.claims.attemptOf(id, workerId, opts.attempt);
    const out = await verb(
      this.engine.work.nack(this.namespace, id, {
        workerId,
        attempt,
        error: opts.error,
        retry: opts.retry ?? true,
        delayMs: opts.delayMs,
        maxAttempts: opts.maxAttempts,
      }),
    );
    this.claims.done(id, workerId, attempt);
    return out.state;
  }

  heartbeat(id: string, workerId: string, opts: HolderOptions & { leaseMs?: number } = {}): Promise<HeartbeatAnswer> {
    this.workersSeen.touch(workerId);
    return verb(
      this.engine.work.heartbeat(this.namespace, id, {
        workerId,
        attempt: this.claims.attemptOf(id, workerId, opts.attempt),
        leaseMs: opts.leaseMs,
      }),
    );
  }

  // ------------------------------------------------------------ journal

  async journalAppend(id: string, seq: number | null, frame: Frame | Uint8Array, opts: AppendOptions = {}): Promise<number> {
    const f = frame instanceof Uint8Array ? await verb(Promise.resolve().then(() => decodeFrame(frame))) : frame;
    const held = this.claims.get(id);
    const workerId = opts.workerId ?? held?.workerId;
    if (!workerId) throw new BadRequestError(`journalAppend(${id}): no workerId given and this client did not claim ${id}`);
    const out = await verb(
      this.engine.journal.append(this.namespace, id, {
        workerId,
        attempt: opts.attempt ?? (held?.workerId === workerId ? held.attempt : null),
        seq,
        kind: f.kind,
        body: f.body,
        meta: f.meta,
        final: opts.final,
      }),
    );
    return out.seq;
  }

  async *journalRead(id: string, opts: ReadOptions = {}): AsyncGenerator<JournalFrame> {
    let cursor = opts.since ?? -1;
    // The timeout is of silence: each frame starts it again.
    const quiet = () => (opts.timeoutMs === undefined ? Infinity : Date.now() + opts.timeoutMs);
    let deadline = quiet();
    for (;;) {
      const left = deadline - Date.now();
      if (left <= 0) throw new TimeoutError(`journal of ${id} wrote nothing for ${opts.timeoutMs} ms and has not ended`);
      const page = await this.clocks.waiting(() =>
        verb(this.engine.journal.follow(this.namespace, id, cursor, Math.min(left, this.engine.limits.maxResultWaitMs), opts.signal)),
      );
      if (page.frames.length) deadline = quiet();
      for (const f of page.frames) {
        cursor = f.seq;
        yield f;
      }
      if (page.done || opts.signal?.aborted) return;
    }
  }

  journalPage(id: string, opts: { since?: number; limit?: number } = {}): Promise<JournalPage> {
    return verb(this.engine.journal.read(this.namespace, id, opts.since, opts.limit));
  }

  journalTrim(id: string, keepLast: number): Promise<number> {
    return verb(this.engine.journal.trim(this.namespace, id, keepLast));
  }

  /** How many calls wait in this process right now (parked claims, result waits, journal reads). */
  get parked(): number {
    return this.engine.park.waiters.size;
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.engine.park.wakeAll();
    this.clocks.close();
    await this.feedLog.close();
    this.db.close();
  }
}
