/**
 * The queue Durable Object: one per (namespace, queue), named `<ns>\0<queue>`. Every transition
 * of the queue's rows goes through it, so they are serialized and group-committed to D1; waiting
 * claims, result waits and journal readers park here and are woken by the transition that
 * satisfies them. The D1 rows stay the only truth: this object keeps waiters and an alarm, never
 * queue state. Each method answers a Settled (core/settled.ts): error classes do not cross RPC.
 */
import { DurableObject } from 'cloudflare:workers';
import type { ScheduleRequest } from '../core/admin.ts';
import type { Claimed, QueueSettings } from '../core/types.ts';
import { keys } from '../core/waiters.ts';
import {
  Engine,
  type SettingsRequest,
  type AckRequest,
  type AppendRequest,
  type ClaimRequest,
  type HolderRequest,
  type NackRequest,
  type SubmitRequest,
} from '../core/engine.ts';
import { settle } from '../core/settled.ts';
import { D1Port } from './d1-port.ts';
import { JournalStreams } from './journal-streams.ts';
import { FeedStreams, type Kinds } from './feed-streams.ts';
import type { LogLine } from '../core/feed.ts';
import { WorkerBook, type WorkerInfo } from '../core/workers.ts';
import { RetentionClock } from '../core/retention.ts';
import { leaseKeeper, type TokenGate } from './gate.ts';
import { settingsFrom } from './settings.ts';
import { enter, homeOf, shardNamed } from './directory.ts';
import { modelCounters, tokenReads } from './d1-model.ts';
import { Pushing } from './pushing.ts';
import { formatBookmark } from './bookmark.ts';

type Claim = Omit<ClaimRequest, 'signal' | 'onPark'>;

/**
 * How long a claim's answer is remembered for a late abortWait. A client that left while the
 * answer was on its way is learned of within milliseconds; a client that left after receiving it
 * no longer has a request to abort.
 */
const HANDED_MS = 5_000;

/** Drops a map's entries older than HANDED_MS; insertion order is age order. */
function forgetOld<V>(m: Map<string, V>, at: (v: V) => number) {
  const old = Date.now() - HANDED_MS;
  for (const [k, v] of m) {
    if (at(v) > old) break;
    m.delete(k);
  }
}

/** The object's name, from which it knows its queue (also inside an alarm, after a restart). */
export const queueObjectName = (ns: string, queue: string) => `${ns}\u0000${queue}`;

export class QueueObject extends DurableObject<Env> {
  private readonly engine: Engine;
  private readonly port: D1Port;
  readonly ns: string;
  readonly queue: string;
  /** The shard its namespace lives on (directory.ts), read as the object starts. */
  private shard = '';
  /** The epoch of the move that fenced it (mover.ts), while one does. */
  private fencedAt: number | null = null;
  /** The alarm time this instance last set; a cache of a timer, not of queue state. */
  private alarmAt: number | null = null;
  /** When this queue's next retention pass is due (core/retention.ts). */
  private readonly retention: RetentionClock;
  /** Waits in progress that their caller may call off (abortWait), by the caller's wait id. */
  private readonly waits = new Map<string, AbortController>();
  /**
   * Claims answered in the last HANDED_MS, by wait id: if the caller then learns its client was
   * already gone (abortWait arrives after the answer), their jobs are put back at once.
   */
  private readonly handed = new Map<string, { workerId: string; items: { id: string; attempt: number }[]; at: number }>();
  /** Wait ids called off before their claim arrived (a cancel that overtook it), for HANDED_MS. */
  private readonly calledOff = new Map<string, number>();
  /** This queue's settings as last read or written here (every change goes through this object). */
  private settings: QueueSettings | null = null;
  /** D1 rows read and written by this object's batches, for benchmarks. */
  private readonly rows = { read: 0, written: 0, batches: 0, plans: 0, calls: 0, callMs: 0 };
  /** The workers heard from (workers.ts). */
  private readonly workers: WorkerBook;
  /** The lifecycle feed's readers (feed-streams.ts). */
  private readonly feed: FeedStreams;
  /** Push delivery, while the queue has a push target (pushing.ts). */
  private readonly pushing: Pushing;
  /** The SSE readers of this queue's journals. */
  private readonly streams = new JournalStreams((id, since, waitMs, signal) =>
    this.engine.journal.follow(this.ns, id, since, waitMs, signal, undefined, this.queue),
  );

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    const name = ctx.id.name;
    const at = name?.indexOf('\u0000') ?? -1;
    if (!name || at < 0) throw new Error('a queue object is reached by its name, <ns>\\0<queue> (idFromName)');
    this.ns = name.slice(0, at);
    this.queue = name.slice(at + 1);
    const settings = settingsFrom(env);
    this.port = new D1Port(null);
    this.engine = new Engine(this.port, {
      limits: settings.limits,
      committer: {
        // D1 is a round trip away: a second batch goes out while the first is on its way (committer.ts).
        depth: 2,
        simulatedDelayMs: settings.simulatedDelayMs,
        onBatch: (results, plans) => {
          for (const r of results) {
            this.rows.read += r.rowsRead;
            this.rows.written += r.rowsWritten;
          }
          this.rows.batches++;
          this.rows.plans += plans;
        },
      },
      onWake: (_ns, _queue, at) => this.armAlarm(at),
      singleWriter: true,
      storage: settings.storage,
      pushHosts: settings.pushHosts,
      pushServices: settings.pushServices,
      // A job failed for good: claims parked on this queue's dead-letter queue wake for its dead letter.
      onFailed: () => {
        const dlq = this.settings?.deadLetterQueue;
        if (dlq)
          this.ctx.waitUntil(
            this.queueObject(dlq)
              .poke()
              .catch(() => {}),
          );
      },
    });
    this.retention = new RetentionClock(
      () => this.engine.admin.purge(this.ns, this.queue),
      Date.now,
      (at) => this.armAlarm(at),
    );
    this.engine.park.onFinish = () => this.retention.soon();
    this.feed = new FeedStreams(this.engine.park.events);
    this.workers = new WorkerBook(this.engine.park.events, this.ns, this.queue);
    this.pushing = new Pushing({
      engine: this.engine,
      env,
      ns: this.ns,
      queue: this.queue,
      heard: (workerId, concurrency) => this.workers.heard(workerId, { host: 'plane', concurrency, queues: [this.queue] }),
      log: (workerId, lines) => this.engine.park.events.toldLog(this.ns, this.queue, workerId, lines),
    });
    // Alarms may not survive a restart (local workerd drops them): sweep once and re-arm. Retention
    // is looked at again by the first alarm or finished job. A throw here resets the object, and
    // the next request retries.
    void ctx.blockConcurrencyWhile(async () => {
      const placed = await enter(env, this.ns, this.queue, settings.storage.limitBytes);
      this.port.use(placed.db);
      this.shard = placed.shard;
      this.engine.storage.shard = placed.shard;
      // Started while a move copies its namespace: fenced until the mover says where it went.
      if (placed.state === 'moving') {
        this.fencedAt = placed.epoch;
        void this.port.fence(this.movingMessage());
        this.armAlarm(Date.now() + 1_000);
        return;
      }
      await this.started();
    });
  }

  /** Reads its settings and sweeps once, arming the alarm (at start, and after a move). */
  private async started(): Promise<void> {
    this.settings = (await this.engine.admin.info(this.ns, this.queue)).settings;
    await this.sweep();
    if (this.settings.push) await this.pushing.refresh();
  }

  private movingMessage(): string {
    return `namespace ${JSON.stringify(this.ns)} is moving to another shard: retry in a moment`;
  }

  // ------------------------------------------------------------ moves (src/durable/mover.ts)

  /**
   * A move of its namespace begins: from now no batch of this object reaches any shard (each
   * answers 503 unavailable, which clients retry), parked claims are woken to answer so, and this
   * resolves once the batches already on their way have answered.
   */
  async fence(epoch: number): Promise<{ shard: string }> {
    this.fencedAt = Math.max(this.fencedAt ?? 0, epoch);
    await this.port.fence(this.movingMessage());
    this.engine.park.wakeAll();
    // While fenced, the alarm looks at the directory each second (alarm()).
    this.armAlarm(Date.now() + 1_000);
    return { shard: this.shard };
  }

  /**
   * The move ended: its namespace now lives on `shard` (the one it was on, if the move was rolled
   * back). Batches go there from now; the alarm is armed again from its rows.
   */
  async unfence(shard: string, epoch: number): Promise<void> {
    if (this.fencedAt !== null && epoch < this.fencedAt) throw new Error(`unfence at epoch ${epoch}, fenced at ${this.fencedAt}`);
    const to = shardNamed(this.env, shard);
    this.port.unfence(to.db);
    this.fencedAt = null;
    this.shard = to.name;
    this.engine.storage.shard = to.name;
    this.engine.hints?.forget(this.ns, this.queue);
    await this.started();
  }

  // ------------------------------------------------------------ producers

  submit(req: SubmitRequest) {
    return this.run(() => this.engine.submit(this.ns, this.queue, req));
  }

  submitMany(items: SubmitRequest[]) {
    return this.run(() => this.engine.submitMany(this.ns, this.queue, items));
  }

  cancel(id: string) {
    return this.run(() => this.engine.cancel(this.ns, id, this.queue));
  }

  result(id: string, timeoutMs: unknown, waitId?: string) {
    return this.waiting(waitId, (signal) => this.engine.result(this.ns, id, timeoutMs, signal, this.queue));
  }

  trim(id: string, keepLast: unknown) {
    return this.run(() => this.engine.journal.trim(this.ns, id, keepLast, this.queue));
  }

  /** Retries a failed invocation of this queue. */
  retry(id: string) {
    return this.run(() => this.engine.retry(this.ns, id, this.queue));
  }

  /** Deletes a finished invocation of this queue, with its frames. */
  delete(id: string) {
    return this.run(() => this.engine.delete(this.ns, id, this.queue));
  }

  // ------------------------------------------------------------ operators

  info() {
    return this.run(() => this.engine.admin.info(this.ns, this.queue));
  }

  configure(cfg: SettingsRequest) {
    return this.run(async () => {
      const info = await this.engine.admin.configure(this.ns, this.queue, cfg);
      this.settings = info.settings;
      // A new retention may bring the next purge closer.
      if (cfg.retentionMs !== undefined) this.retention.soon(true);
      if (cfg.push !== undefined) await this.pushing.refresh();
      return info;
    });
  }

  pause() {
    return this.run(() => this.engine.admin.pause(this.ns, this.queue));
  }

  resume() {
    return this.run(() => this.engine.admin.resume(this.ns, this.queue));
  }

  /** Deletes up to `limit` finished jobs of one state of this queue. */
  purgeFinished(state: unknown, limit: unknown) {
    return this.run(() => this.engine.admin.purgeFinished(this.ns, this.queue, state, limit));
  }

  redrive(limit: unknown) {
    return this.run(() => this.engine.admin.redrive(this.ns, this.queue, limit));
  }

  /** This queue as a dead-letter queue: its dead letters' failed jobs back to their queues (whose objects are woken). */
  redriveDeadLetters(limit: unknown) {
    return this.run(async () => {
      const back = await this.engine.admin.redriveDeadLetters(this.ns, this.queue, limit);
      for (const q of new Set(back.map((b) => b.queue)))
        if (q !== this.queue)
          this.ctx.waitUntil(
            this.queueObject(q)
              .poke()
              .catch(() => {}),
          );
      return back;
    });
  }

  setSchedule(name: string, req: ScheduleRequest) {
    return this.run(() => this.engine.admin.setSchedule(this.ns, this.queue, name, req));
  }

  schedules() {
    return this.run(() => this.engine.admin.schedules(this.ns, this.queue));
  }

  removeSchedule(name: string) {
    return this.run(() => this.engine.admin.removeSchedule(this.ns, this.queue, name));
  }

  /** Another object changed this queue's rows (a dead letter, a redriven job): parked claims look again. */
  poke(): void {
    this.engine.park.wake(keys.queue(this.ns, this.queue));
  }

  /**
   * Drops this object's hints of its queue's timing and settings (hints.ts): after its rows were
   * changed around it (an operator's SQL, a test), its next claim sweeps in full and reads them again.
   */
  forgetHints(): void {
    this.engine.hints?.forget(this.ns, this.queue);
  }

  // ------------------------------------------------------------ workers

  /**
   * A claim; answers whether it parked on the way (its caller may then have gone meanwhile). With
   * a `waitId` its caller may call it off (abortWait, when its client goes away): a
   * parked claim then leaves without a job; jobs it took as the abort came, or that were answered
   * within HANDED_MS before it, go back at once (release).
   */
  claim(req: Claim & { worker?: WorkerInfo | null }, waitId?: string) {
    this.workers.heard(req.workerId, req.worker);
    if (waitId !== undefined && this.calledOff.delete(waitId))
      return Promise.resolve({ ok: true as const, value: { claimed: [] as Claimed[], parked: false } });
    return this.waiting(waitId, async (signal) => {
      let parked = false;
      const got = await this.engine.work.claimMany(this.ns, this.queue, { ...req, signal, onPark: () => (parked = true) });
      return { claimed: await this.handing(req.workerId, waitId, signal, got), parked };
    });
  }

  /** A worker's acks (of this queue's invocations) and its next claim, in one D1 batch. */
  ackAndClaim(acks: AckRequest[], req: Claim & { worker?: WorkerInfo | null }) {
    this.workers.heard(req.workerId, req.worker);
    return this.run(() => this.engine.work.ackAndClaim(this.ns, this.queue, acks, req));
  }

  /** Claimed jobs on their way to a caller: kept a moment by wait id, or put back if it already left. */
  private async handing(
    workerId: unknown,
    waitId: string | undefined,
    signal: AbortSignal | undefined,
    got: Claimed[],
  ): Promise<Claimed[]> {
    if (!waitId || !got.length || typeof workerId !== 'string') return got;
    const items = got.map((c) => ({ id: c.id, attempt: c.attempt }));
    if (signal?.aborted) {
      await this.engine.work.release(this.ns, this.queue, workerId, items);
      return [];
    }
    this.handed.set(waitId, { workerId, items, at: Date.now() });
    forgetOld(this.handed, (h) => h.at);
    return got;
  }

  ackMany(items: AckRequest[]) {
    this.workers.heard(items[0]?.workerId);
    return this.run(() =>
      this.engine.work.ackMany(
        this.ns,
        items.map((it) => ({ ...it, queue: this.queue })),
      ),
    );
  }

  nackMany(items: (NackRequest & { id: string })[]) {
    this.workers.heard(items[0]?.workerId);
    return this.run(() =>
      this.engine.work.nackMany(
        this.ns,
        items.map((it) => ({ ...it, queue: this.queue })),
      ),
    );
  }

  ack(id: string, req: HolderRequest & { result?: unknown }) {
    this.workers.heard(req.workerId);
    return this.run(() => this.engine.work.ack(this.ns, id, { ...req, queue: this.queue }));
  }

  nack(id: string, req: NackRequest) {
    this.workers.heard(req.workerId);
    return this.run(() => this.engine.work.nack(this.ns, id, { ...req, queue: this.queue }));
  }

  heartbeat(id: string, req: HolderRequest & { leaseMs?: unknown }) {
    this.workers.heard(req.workerId);
    return this.run(() => this.engine.work.heartbeat(this.ns, id, { ...req, queue: this.queue }));
  }

  append(id: string, req: AppendRequest) {
    return this.run(() => this.engine.journal.append(this.ns, id, { ...req, queue: this.queue }));
  }

  /**
   * An SSE stream of a journal after `since` (journal-streams.ts): its bytes, once the first page
   * was read (a bad id fails here, before any stream exists).
   */
  /**
   * An SSE stream of a journal, as a fetch (`/journal-stream?id=&since=&gate=&lease=`) whose body
   * the Worker relays: a reader going away cancels it back here, as through any proxy. The stream
   * keeps its token's stream lease (gate.ts) while it lives. A bad id fails before any stream
   * exists: its status and `{error}` body.
   */
  override async fetch(req: Request): Promise<Response> {
    const url = new URL(req.url);
    const p = url.searchParams;
    const lease = () =>
      leaseKeeper(
        this.env.GATE as unknown as DurableObjectNamespace<TokenGate>,
        { key: p.get('gate') ?? '', id: p.get('lease') ?? '' },
        (x) => this.ctx.waitUntil(x),
      );
    if (url.pathname === '/events') {
      // A namespace-wide reader's Worker keeps its lease itself (it merges many queues): no gate then.
      const l = p.get('gate') ? lease() : null;
      l?.renew();
      return new Response(
        this.feed.open(p.get('last'), l ? { alive: l.renew, ended: l.close } : undefined, (p.get('kinds') ?? 'all') as Kinds),
      );
    }
    if (url.pathname !== '/journal-stream')
      return Response.json({ error: { code: 'not_found', message: 'no such path' } }, { status: 404 });
    const id = p.get('id') ?? '';
    const since = Number(p.get('since'));
    const out = await this.run(async () => this.engine.journal.follow(this.ns, id, since, 0, undefined, undefined, this.queue));
    if (!out.ok) return Response.json({ error: out.error }, { status: 400 });
    const l = lease();
    return new Response(this.streams.open(id, since, out.value, { alive: l.renew, ended: l.close }));
  }

  /** The next page of a journal after `since`, waiting up to `timeoutMs` for one (a JSON read with wait_ms). */
  follow(id: string, since: unknown, timeoutMs: unknown, limit?: unknown, waitId?: string) {
    return this.waiting(waitId, (signal) => this.engine.journal.follow(this.ns, id, since, timeoutMs, signal, limit, this.queue));
  }

  /**
   * Calls off a wait this caller started with `waitId` (its client went away): a parked claim
   * leaves the queue before it can take a job, a claim answered moments ago gives its jobs back,
   * a reader stops waiting. False if there was nothing to call off.
   */
  async abortWait(waitId: string): Promise<boolean> {
    const w = this.waits.get(waitId);
    if (w) {
      w.abort();
      return true;
    }
    const h = this.handed.get(waitId);
    if (!h) {
      this.calledOff.set(waitId, Date.now());
      forgetOld(this.calledOff, (at) => at);
      return false;
    }
    this.handed.delete(waitId);
    await this.engine.work.release(this.ns, this.queue, h.workerId, h.items);
    return true;
  }

  /** The workers heard from here, and the running jobs each holds (read from the rows). */
  workersSeen() {
    return this.run(async () => {
      const running = await this.engine.list(this.ns, this.queue, 'running', 1000, null);
      return { workers: this.workers.list(), running: running.items.map((i) => ({ id: i.id, workerId: i.workerId })) };
    });
  }

  /** The worker says it stops (its runtime, at shutdown). RPC methods are the prototype's: no arrow fields. */
  workerStopped(workerId: string) {
    return this.workers.stopped(workerId);
  }
  /** Log lines of the worker's jobs, for the feed's readers (checked by the route: core/feed.ts logLines). */
  workerLog(workerId: string, lines: LogLine[]) {
    this.engine.park.events.toldLog(this.ns, this.queue, workerId, lines);
  }

  /** This queue's transition counters since the object started, its jobs finished lately and its pusher's figures (they live in its memory). */
  counters() {
    const feed = this.engine.park.events;
    const [c] = feed.counters(this.ns, this.queue);
    return { since: feed.since, counts: c?.counts ?? null, recent: feed.recent(this.ns, this.queue), pushing: this.pushing.stats() };
  }

  /** D1 rows read and written by this object so far (D1's own result metadata). */
  stats() {
    return {
      ...this.rows,
      d1_ms: this.port.busyMs,
      shard: this.shard,
      d1_model: modelCounters(),
      token_reads: tokenReads(),
      waiters: this.engine.park.waiters.size,
      streams: this.streams.size,
      feed_readers: this.feed.size,
      push: this.pushing.stats(),
    };
  }

  // ------------------------------------------------------------ leases

  override async alarm(): Promise<void> {
    this.alarmAt = null;
    // Fenced by a move: the mover unfences it; should that call not arrive, the directory says
    // where the namespace went once the move ended (or was undone). Until then, look each second.
    if (this.port.fenced) {
      const row = await homeOf(this.env)
        .prepare(`SELECT shard, state, epoch FROM namespaces WHERE ns = ?1`)
        .bind(this.ns)
        .first<{ shard: string; state: string; epoch: number }>();
      if (row?.state === 'active' && row.epoch > (this.fencedAt ?? 0)) await this.unfence(row.shard, row.epoch);
      else this.armAlarm(Date.now() + 1_000);
      return;
    }
    await this.sweep();
    // Retention, when due; the first alarm of this instance looks too (the purge alarm it had may be the one firing).
    const purge = await this.retention.due();
    if (purge !== null) this.armAlarm(purge);
  }

  /**
   * The queue's timed work: submits due schedule ticks, expires overdue leases, promotes due
   * delayed jobs, fails jobs past their TTL; then arms the alarm for the next of these.
   */
  private async sweep(): Promise<void> {
    await this.engine.admin.fire(this.ns, this.queue);
    const next = await this.engine.work.sweep(this.ns, this.queue);
    if (next !== null) this.armAlarm(next);
  }

  private queueObject(queue: string): DurableObjectStub<QueueObject> {
    return (this.env.QUEUE as unknown as DurableObjectNamespace<QueueObject>).getByName(queueObjectName(this.ns, queue));
  }

  private armAlarm(deadline: number): void {
    if (this.alarmAt !== null && this.alarmAt <= deadline) return;
    this.alarmAt = deadline;
    void this.ctx.storage.setAlarm(deadline);
  }

  /** Runs a verb that may wait, under an AbortSignal that abortWait(waitId) fires. */
  private waiting<T>(waitId: string | undefined, fn: (signal: AbortSignal | undefined) => Promise<T>) {
    if (!waitId) return this.run(() => fn(undefined));
    const ac = new AbortController();
    this.waits.set(waitId, ac);
    return this.run(() => fn(ac.signal)).finally(() => this.waits.delete(waitId));
  }

  /** Runs one verb and answers it settled, counting calls for the benchmark. */
  private run<T>(fn: () => Promise<T>) {
    const t0 = Date.now();
    return settle(fn)
      .then((a) => {
        // The newest point of its shard this object has written (or read): the client's way to
        // read its own writes from a replica (bookmark.ts).
        const b = this.port.bookmark;
        return b && this.shard ? { ...a, bookmark: formatBookmark({ shard: this.shard, d1: b }) } : a;
      })
      .finally(() => {
        this.rows.calls++;
        this.rows.callMs += Date.now() - t0;
      });
  }
}
