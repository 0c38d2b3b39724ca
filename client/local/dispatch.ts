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
import { DatabaseSync } from './sqlite.ts';
import { Engine } from '../../src/core/engine.ts';
import type { PushTarget } from '../../src/core/push-target.ts';
import type { PushStats } from '../../src/core/push.ts';
import { decodeFrame } from '../../src/core/frame.ts';
import type { Limits } from '../../src/core/limits.ts';
import type { State } from '../../src/core/states.ts';
import type { Claimed, Frame, HeartbeatAnswer, Invocation, JournalFrame, JournalPage } from '../../src/core/types.ts';
import * as v from '../../src/core/validate.ts';
import { asClientError, BadRequestError, errorFor, InvocationCancelledError, InvocationFailedError, TimeoutError } from '../errors.ts';
import type {
  AckRequest,
  AppendOptions,
  ClaimOptions,
  DispatchPlane,
  HolderOptions,
  NackOptions,
  NackedState,
  QueueInfo,
  ReadOptions,
  Schedule,
  ScheduleOptions,
  SettingsChange,
  SubmitOptions,
  ListOptions,
  InvocationPage,
  QueueOverview,
  FeedItem,
  FeedOptions,
  LogLine,
  WorkerSeen,
  StorageState,
} from '../types.ts';
import { kindsOf, localMetrics, LocalWorkers } from './observe.ts';
import { FeedLog } from './feed-log.ts';
import { RetentionClock } from '../../src/core/retention.ts';
import { Batcher } from '../batcher.ts';
import { migrate } from './migrate.ts';
import { SqlitePort } from './sqlite-port.ts';

export interface DispatchOptions {
  namespace?: string;
  limits?: Partial<Limits>;
  /** How often to check for other processes' commits while something waits. Default 5 ms. */
  changeCheckMs?: number;
  /** How long a transaction waits for another process's write lock. Default 10 s. */
  busyTimeoutMs?: number;
  /** The plane's clock (leases, timestamps); tests inject one. Default Date.now. */
  now?: () => number;
  /**
   * The file's storage budget (docs/contract.md, "Storage"): past the high-water mark submits are
   * refused with StorageFullError. Default 10 GB and 90 %, as a D1 shard's.
   */
  storage?: { limitBytes: number; highWaterPercent?: number };
}

/** Runs a verb, re-raising plane errors as their client classes. */
async function verb<T>(p: Promise<T>): Promise<T> {
  try {
    return await p;
  } catch (e) {
    throw asClientError(e);
  }
}

export class Dispatch implements DispatchPlane {
  readonly path: string;
  readonly namespace: string;
  readonly inProcess = true;
  readonly db: DatabaseSync;
  private readonly engine: Engine;
  private readonly claims = new Map<string, { workerId: string; attempt: number }>();
  private readonly changeCheckMs: number;
  private watcher: ReturnType<typeof setInterval> | null = null;
  private dataVersion = -1;
  private readonly timers = new Map<string, { at: number; timer: ReturnType<typeof setTimeout> }>();
  private readonly watched = new Set<string>();
  /** When each queue's next retention pass is due (core/retention.ts). */
  private readonly retention = new Map<string, RetentionClock>();
  /** The workers this process heard from (GET /workers on the edge plane). */
  private readonly workersSeen: LocalWorkers;
  private readonly feedLog: FeedLog;
  private closed = false;
  private readonly now: () => number;
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
    this.path = path;
    this.namespace = v.namespace(opts.namespace ?? 'default');
    this.changeCheckMs = opts.changeCheckMs ?? 5;
    this.db = new DatabaseSync(path);
    // Schema setup waits for the lock inside SQLite; transitions wait in SqlitePort, without blocking.
    this.db.exec(`PRAGMA busy_timeout = ${opts.busyTimeoutMs ?? 10_000}`);
    if (path !== ':memory:') {
      this.db.exec('PRAGMA journal_mode = WAL');
      this.db.exec('PRAGMA synchronous = NORMAL');
    }
    migrate(this.db);
    this.db.exec('PRAGMA busy_timeout = 0');
    this.now = opts.now ?? Date.now;
    const port = new SqlitePort(this.db, opts.busyTimeoutMs ?? 10_000);
    this.engine = new Engine(port, {
      limits: opts.limits,
      now: this.now,
      storage: opts.storage,
      onWake: (ns, queue, at) => this.armTimer(ns, queue, at),
      // Dead letters are queued rows of another queue: wake this process's claims, they look again.
      onFailed: () => this.engine.park.wakeAll(),
    });
    this.workersSeen = new LocalWorkers(this.engine, this.namespace);
    // The feed crosses processes: this process's records go to the file, readers follow the file.
    this.feedLog = new FeedLog(port, this.engine.park.events, this.namespace);
    // A job finished: unless a purge pass already knows when it has work next, run one soon.
    this.engine.park.onFinish = (ns, queue) => this.clock(ns, queue).soon();
  }

  // ------------------------------------------------------------ producers

  /** Concurrent submits to a queue go to the engine together, as one set-based INSERT. */
  submit(queue: string, envelope: Uint8Array, opts: SubmitOptions): Promise<string> {
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
      const out = await this.waiting(() => verb(this.engine.result(this.namespace, id, slice, opts.signal)));
      if (out.state === 'succeeded') return out.result;
      if (out.state === 'failed') throw new InvocationFailedError(id, out.error);
      if (out.state === 'cancelled') throw new InvocationCancelledError(id);
      if (Date.now() >= deadline || opts.signal?.aborted)
        throw new TimeoutError(`invocation ${id} is still ${out.state} after ${timeoutMs} ms`);
    }
  }

  count(queue: string, state: State = 'queued'): Promise<number> {
    return verb(this.engine.count(this.namespace, queue, state));
  }

  listQueues(): Promise<string[]> {
    return verb(this.engine.queues(this.namespace));
  }

  overview(queues?: string[]): Promise<QueueOverview[]> {
    return verb(this.engine.overview(this.namespace, queues));
  }

  /** The feed of every process on this file (feed-log.ts), from now on. */
  async *events(queue: string | null, opts: FeedOptions = {}): AsyncGenerator<FeedItem> {
    const q = queue === null ? null : v.queue(queue, this.engine.limits);
    yield* this.feedLog.follow(q, kindsOf(opts.kinds), opts.signal);
  }

  metrics(): Promise<string> {
    return verb(localMetrics(this.engine, this.namespace));
  }

  /** The file's storage against its budget (the `storage` option). */
  storage(): Promise<StorageState> {
    return verb(this.engine.storageState());
  }

  /** The workers this process heard from (a worker in another process is heard there). */
  workers(): Promise<WorkerSeen[]> {
    return verb(this.workersSeen.list());
  }

  workerStopped = async (queue: string, workerId: string): Promise<void> => this.workersSeen.stopped(queue, workerId);
  workerLog = (queue: string, workerId: string, lines: LogLine[]): Promise<void> => verb(this.workersSeen.log(queue, workerId, lines));

  list(queue: string, opts: ListOptions = {}): Promise<InvocationPage> {
    return verb(this.engine.list(this.namespace, queue, opts.state ?? 'queued', opts.limit, opts.cursor ?? null));
  }

  /**
   * The queue's push target with its signing secrets, or null, and the plane's limits: for
   * `lakeshore push` (push.ts). Whoever can read this file can read them anyway.
   */
  async pushTarget(queue: string): Promise<{ target: PushTarget | null; limits: Limits }> {
    return { target: await verb(this.engine.admin.pushTarget(this.namespace, queue)), limits: this.engine.limits };
  }

  /** `startPushing` tells the dispatch of its pusher for `queue` (null: stopped), so the overview shows its figures. */
  pushingFrom(queue: string, pusher: { stats(): PushStats } | null): void {
    const key = `${this.namespace}\0${queue}`;
    if (pusher) this.engine.pushers.set(key, pusher);
    else this.engine.pushers.delete(key);
  }

  async configureQueue(queue: string, s: SettingsChange): Promise<QueueInfo> {
    const info = await verb(this.engine.admin.configure(this.namespace, queue, s));
    // A new retention may bring the next purge closer.
    if (s.retentionMs !== undefined) {
      this.clock(this.namespace, queue).soon(true);
    }
    return info;
  }

  queueInfo(queue: string): Promise<QueueInfo> {
    return verb(this.engine.admin.info(this.namespace, queue));
  }

  pauseQueue(queue: string): Promise<void> {
    return verb(this.engine.admin.pause(this.namespace, queue));
  }

  resumeQueue(queue: string): Promise<void> {
    return verb(this.engine.admin.resume(this.namespace, queue));
  }

  async redrive(queue: string, opts: { limit?: number; deadLetters?: boolean } = {}): Promise<{ id: string; queue: string }[]> {
    if (opts.deadLetters) return verb(this.engine.admin.redriveDeadLetters(this.namespace, queue, opts.limit));
    return (await verb(this.engine.admin.redrive(this.namespace, queue, opts.limit))).map((id) => ({ id, queue }));
  }

  async setSchedule(queue: string, name: string, opts: ScheduleOptions): Promise<Schedule> {
    return verb(this.engine.admin.setSchedule(this.namespace, queue, name, opts));
  }

  listSchedules(queue: string): Promise<Schedule[]> {
    return verb(this.engine.admin.schedules(this.namespace, queue));
  }

  removeSchedule(queue: string, name: string): Promise<void> {
    return verb(this.engine.admin.removeSchedule(this.namespace, queue, name));
  }

  retry(id: string): Promise<void> {
    return verb(this.engine.retry(this.namespace, id));
  }

  delete(id: string): Promise<void> {
    return verb(this.engine.delete(this.namespace, id));
  }

  purge(queue: string, opts: { state: 'succeeded' | 'failed' | 'cancelled'; limit?: number }): Promise<number> {
    return verb(this.engine.admin.purgeFinished(this.namespace, queue, opts?.state, opts?.limit));
  }

  // ------------------------------------------------------------ workers

  async claim(queue: string, workerId: string, opts: ClaimOptions = {}): Promise<Claimed | null> {
    const [c] = await this.claimMany(queue, workerId, 1, opts);
    return c ?? null;
  }

  async claimMany(queue: string, workerId: string, max: number, opts: ClaimOptions = {}): Promise<Claimed[]> {
    this.workersSeen.heard(queue, workerId, opts.worker);
    if (opts.waitMs) void this.watchQueue(queue).catch(() => {});
    const got = await this.waiting(() =>
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
    for (const c of got) this.claims.set(c.id, { workerId, attempt: c.attempt });
    return got;
  }

  async ackAndClaim(
    queue: string,
    workerId: string,
    acks: AckRequest[],
    max: number,
    opts: ClaimOptions = {},
  ): Promise<{ acks: (Error | null)[]; claimed: Claimed[] }> {
    this.workersSeen.heard(queue, workerId, opts.worker);
    const items = acks.map((a) => ({ id: a.id, workerId, attempt: this.attemptOf(a.id, workerId, a.attempt), result: a.result ?? null }));
    const out = await this.waiting(() =>
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
      if (r.ok) this.claims.delete(acks[i]!.id);
    });
    for (const c of out.claimed) this.claims.set(c.id, { workerId, attempt: c.attempt });
    return { claimed: out.claimed, acks: out.acks.map((r) => (r.ok ? null : errorFor(r.error.code, r.error.message))) };
  }

  /** Concurrent acks go to the engine together, as one fenced UPDATE; each keeps its own answer. */
  async ack(id: string, workerId: string, opts: HolderOptions & { result?: Uint8Array | null } = {}): Promise<void> {
    this.workersSeen.touch(workerId);
    await this.acker.add({ id, workerId, attempt: this.attemptOf(id, workerId, opts.attempt), result: opts.result ?? null });
    this.claims.delete(id);
  }

  async nack(id: string, workerId: string, opts: NackOptions): Promise<NackedState> {
    this.workersSeen.touch(workerId);
    const out = await verb(
      this.engine.work.nack(this.namespace, id, {
        workerId,
        attempt: this.attemptOf(id, workerId, opts.attempt),
        error: opts.error,
        retry: opts.retry ?? true,
        delayMs: opts.delayMs,
        maxAttempts: opts.maxAttempts,
      }),
    );
    this.claims.delete(id);
    return out.state;
  }

  heartbeat(id: string, workerId: string, opts: HolderOptions & { leaseMs?: number } = {}): Promise<HeartbeatAnswer> {
    this.workersSeen.touch(workerId);
    return verb(
      this.engine.work.heartbeat(this.namespace, id, {
        workerId,
        attempt: this.attemptOf(id, workerId, opts.attempt),
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
      const page = await this.waiting(() =>
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
    if (this.watcher) clearInterval(this.watcher);
    for (const t of this.timers.values()) clearTimeout(t.timer);
    this.feedLog.close();
    this.db.close();
  }

  // ------------------------------------------------------------ plumbing

  private attemptOf(id: string, workerId: string, attempt: number | undefined): number | null {
    if (attempt !== undefined) return attempt;
    const held = this.claims.get(id);
    return held && held.workerId === workerId ? held.attempt : null;
  }

  /** Watches for other processes' commits while `fn` may be parked, waking the engine's waiters. */
  private async waiting<T>(fn: () => Promise<T>): Promise<T> {
    this.watch();
    try {
      return await fn();
    } finally {
      if (this.engine.park.waiters.size === 0 && this.watcher) {
        clearInterval(this.watcher);
        this.watcher = null;
      }
    }
  }

  private watch(): void {
    if (this.watcher || this.path === ':memory:') return;
    this.dataVersion = this.version();
    this.watcher = setInterval(() => {
      if (this.closed) return;
      const now = this.version();
      if (now !== this.dataVersion) {
        this.dataVersion = now;
        this.engine.park.wakeAll();
      }
    }, this.changeCheckMs);
    this.watcher.unref?.();
  }

  private version(): number {
    return Number((this.db.prepare('PRAGMA data_version').get() as { data_version: number }).data_version);
  }

  /**
   * The local alarm: at `at`, the queue's timed work (due schedule ticks, expired leases, due
   * delayed jobs, TTLs), then again at its next moment. It runs while this process has the plane
   * open: a process that claims from a queue keeps its timer going (watchQueue).
   */
  private armTimer(ns: string, queue: string, at: number): void {
    const key = `${ns}\u0000${queue}`;
    const cur = this.timers.get(key);
    if (cur && cur.at <= at) return;
    if (cur) clearTimeout(cur.timer);
    const timer = setTimeout(
      async () => {
        this.timers.delete(key);
        if (this.closed) return;
        try {
          await this.engine.admin.fire(ns, queue);
          const next = await this.engine.work.sweep(ns, queue);
          const purge = await this.clock(ns, queue).due();
          const at = next === null ? purge : purge === null ? next : Math.min(next, purge);
          if (at !== null) this.armTimer(ns, queue, at);
        } catch {
          /* the next claim sweeps the queue itself */
        }
      },
      Math.max(0, at - this.now()) + 5,
    );
    timer.unref?.();
    this.timers.set(key, { at, timer });
  }

  /** The retention clock of a queue (it arms this process's timer for the queue). */
  private clock(ns: string, queue: string): RetentionClock {
    const key = `${ns}\u0000${queue}`;
    let c = this.retention.get(key);
    if (!c)
      this.retention.set(
        key,
        (c = new RetentionClock(
          () => this.engine.admin.purge(ns, queue),
          this.now,
          (at) => this.armTimer(ns, queue, at),
        )),
      );
    return c;
  }

  /** A queue this process claims from: its timer is armed for whatever it waits for (set by any process). */
  private async watchQueue(queue: string): Promise<void> {
    if (this.watched.has(queue)) return;
    this.watched.add(queue);
    const next = await this.engine.work.sweep(this.namespace, queue);
    if (next !== null) this.armTimer(this.namespace, queue, next);
    // Retention for what finished before this process watched the queue.
    await this.clock(this.namespace, queue).due();
  }
}
