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
import type {
  Engine,
  SettingsRequest,
  AckRequest,
  AppendRequest,
  ClaimRequest,
  HolderRequest,
  NackRequest,
  SubmitRequest,
} from '../core/engine.ts';
import { D1Port } from './d1-port.ts';
import { QueueStreams } from './queue-streams.ts';
import type { LogLine } from '../core/feed.ts';
import { WorkerBook, type WorkerInfo } from '../core/workers.ts';
import { RetentionClock } from '../core/retention.ts';
import { settingsFrom } from './settings.ts';
import { modelCounters, tokenReads } from './d1-model.ts';
import { KEEP_AWAKE_MS, Pushing } from './pushing.ts';
import { CallOffs } from './call-offs.ts';
import { type BatchCounters, queueEngine } from './queue-engine.ts';
import { ShardPlace } from './shard-place.ts';
import { QueueCalls } from './queue-calls.ts';

type Claim = Omit<ClaimRequest, 'signal' | 'onPark'>;

/** The object's name, from which it knows its queue (also inside an alarm, after a restart). */
export const queueObjectName = (ns: string, queue: string) => `${ns}\u0000${queue}`;

/** Items of a batch, each of `queue`. */
const ofQueue = <T>(items: T[], queue: string) => items.map((it) => ({ ...it, queue }));

export class QueueObject extends DurableObject<Env> {
  private readonly engine: Engine;
  private readonly port: D1Port;
  readonly ns: string;
  readonly queue: string;
  /** Its shard, and a move's fence on its writes (shard-place.ts). */
  private readonly place: ShardPlace;
  /** The alarm time this instance last set; a cache of a timer, not of queue state. */
  private alarmAt: number | null = null;
  /** When this queue's next retention pass is due (core/retention.ts). */
  private readonly retention: RetentionClock;
  /** Waits its callers may call off when their client goes away (call-offs.ts). */
  private readonly callOffs: CallOffs;
  /** This queue's settings as last read or written here (every change goes through this object). */
  private settings: QueueSettings | null = null;
  /** D1 rows read and written by this object's batches, for benchmarks. */
  private readonly rows: BatchCounters = { read: 0, written: 0, batches: 0, plans: 0, calls: 0, callMs: 0, claims: 0 };
  /** The workers heard from (workers.ts). */
  private readonly workers: WorkerBook;
  /** Its lifecycle feed's and journals' SSE readers (queue-streams.ts). */
  private readonly streams: QueueStreams;
  /** Push delivery, while the queue has a push target (pushing.ts). */
  private readonly pushing: Pushing;
  /** How its calls run: started, settled, bookmarked and counted (queue-calls.ts). */
  private readonly calls: QueueCalls;

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    const name = ctx.id.name;
    const at = name?.indexOf('\u0000') ?? -1;
    if (!name || at < 0) throw new Error('a queue object is reached by its name, <ns>\\0<queue> (idFromName)');
    this.ns = name.slice(0, at);
    this.queue = name.slice(at + 1);
    const settings = settingsFrom(env);
    this.port = new D1Port(null);
    this.engine = queueEngine(this.port, settings, this.rows, {
      onWake: (at) => this.armAlarm(at),
      // A job failed for good: claims parked on this queue's dead-letter queue wake for its dead letter.
      onFailed: () => {
        const dlq = this.settings?.deadLetterQueue;
        if (dlq) this.pokeQueue(dlq);
      },
    });
    this.retention = new RetentionClock(
      () => this.engine.admin.purge(this.ns, this.queue),
      Date.now,
      (at) => this.armAlarm(at),
    );
    this.engine.park.onFinish = () => this.retention.soon();
    this.callOffs = new CallOffs((workerId, items) => this.engine.work.release(this.ns, this.queue, workerId, items));
    // What its parts need of it.
    const its = { env, ns: this.ns, queue: this.queue, engine: this.engine };
    this.streams = new QueueStreams({
      ...its,
      waitUntil: (p) => this.ctx.waitUntil(p),
      run: (fn) => this.calls.run(fn),
    });
    this.workers = new WorkerBook(this.engine.park.events, this.ns, this.queue);
    this.pushing = new Pushing({
      ...its,
      heard: (workerId, concurrency) => this.workers.heard(workerId, { host: 'plane', concurrency, queues: [this.queue] }),
      log: (workerId, lines) => this.engine.park.events.toldLog(this.ns, this.queue, workerId, lines),
      keepAwake: () => this.armAlarm(Date.now() + KEEP_AWAKE_MS),
      asked: () => this.place.asked(),
    });
    // It finds its shard and starts at its first call or alarm (shard-place.ts `prepare`), not
    // here: a move's fence may be the only call an idle object gets. Starting sweeps once and
    // re-arms, as alarms may not survive a restart (local workerd drops them); retention is looked
    // at again by the first alarm or finished job. A start that throws is tried again by the next call.
    this.place = new ShardPlace({
      ...its,
      port: this.port,
      armAlarm: (at) => this.armAlarm(at),
      started: () => this.started(),
      limitBytes: settings.storage.limitBytes,
    });
    this.calls = new QueueCalls(this.place, this.port, this.rows, this.callOffs);
  }

  /** Reads its settings and sweeps once, arming the alarm (at its first call, and after a move). */
  private async started(): Promise<void> {
    this.settings = (await this.engine.admin.info(this.ns, this.queue)).settings;
    await this.sweep();
    if (this.settings.push) await this.pushing.refresh();
  }

  // ------------------------------------------------------------ moves (mover.ts, shard-place.ts)

  /** A move of its namespace begins: its writes are fenced (shard-place.ts). */
  fence(epoch: number): Promise<{ shard: string }> {
    return this.place.fence(epoch);
  }

  /** The move ended: its namespace now lives on `shard`. */
  unfence(shard: string, epoch: number): Promise<void> {
    return this.place.unfence(shard, epoch);
  }

  // ------------------------------------------------------------ producers

  submit(req: SubmitRequest) {
    return this.calls.run(() => this.engine.submit(this.ns, this.queue, req));
  }

  submitMany(items: SubmitRequest[]) {
    return this.calls.run(() => this.engine.submitMany(this.ns, this.queue, items));
  }

  cancel(id: string) {
    return this.calls.run(() => this.engine.cancel(this.ns, id, this.queue));
  }

  result(id: string, timeoutMs: unknown, waitId?: string) {
    return this.calls.waiting(waitId, (signal) => this.engine.result(this.ns, id, timeoutMs, signal, this.queue));
  }

  /** Waits on many of this queue's jobs at once: those ended, as soon as any is (core/results.ts). */
  results(ids: string[], timeoutMs: unknown, waitId?: string, after?: string | null) {
    return this.calls.waiting(waitId, (signal) => this.engine.results(this.ns, this.queue, ids, timeoutMs, signal, after));
  }

  trim(id: string, keepLast: unknown) {
    return this.calls.run(() => this.engine.journal.trim(this.ns, id, keepLast, this.queue));
  }

  /** Retries a failed invocation of this queue. */
  retry(id: string) {
    return this.calls.run(() => this.engine.retry(this.ns, id, this.queue));
  }

  /** Deletes a finished invocation of this queue, with its frames. */
  delete(id: string) {
    return this.calls.run(() => this.engine.delete(this.ns, id, this.queue));
  }

  // ------------------------------------------------------------ operators

  info() {
    return this.calls.run(() => this.engine.admin.info(this.ns, this.queue));
  }

  configure(cfg: SettingsRequest) {
    return this.calls.run(async () => {
      const info = await this.engine.admin.configure(this.ns, this.queue, cfg);
      this.settings = info.settings;
      // A new retention may bring the next purge closer.
      if (cfg.retentionMs !== undefined || cfg.journalRetentionMs !== undefined) this.retention.soon(true);
      if (cfg.push !== undefined) await this.pushing.refresh();
      return info;
    });
  }

  pause() {
    return this.calls.run(() => this.engine.admin.pause(this.ns, this.queue));
  }

  resume() {
    return this.calls.run(() => this.engine.admin.resume(this.ns, this.queue));
  }

  /** Deletes up to `limit` finished jobs of one state of this queue. */
  purgeFinished(state: unknown, limit: unknown) {
    return this.calls.run(() => this.engine.admin.purgeFinished(this.ns, this.queue, state, limit));
  }

  redrive(limit: unknown) {
    return this.calls.run(() => this.engine.admin.redrive(this.ns, this.queue, limit));
  }

  /** This queue as a dead-letter queue: its dead letters' failed jobs back to their queues (whose objects are woken). */
  redriveDeadLetters(limit: unknown) {
    return this.calls.run(async () => {
      const back = await this.engine.admin.redriveDeadLetters(this.ns, this.queue, limit);
      for (const q of new Set(back.map((b) => b.queue))) if (q !== this.queue) this.pokeQueue(q);
      return back;
    });
  }

  setSchedule(name: string, req: ScheduleRequest) {
    return this.calls.run(() => this.engine.admin.setSchedule(this.ns, this.queue, name, req));
  }

  schedules() {
    return this.calls.run(() => this.engine.admin.schedules(this.ns, this.queue));
  }

  removeSchedule(name: string) {
    return this.calls.run(() => this.engine.admin.removeSchedule(this.ns, this.queue, name));
  }

  /** Another object changed this queue's rows (a dead letter, a redriven job): parked claims look again. */
  poke() {
    return this.calls.begun(() => this.engine.park.wake(keys.queue(this.ns, this.queue)));
  }

  /**
   * Drops this object's hints of its queue's timing and settings (hints.ts): after its rows were
   * changed around it (an operator's SQL, a test), its next claim sweeps in full and reads them again.
   */
  forgetHints() {
    return this.calls.begun(() => this.engine.hints?.forget(this.ns, this.queue));
  }

  // ------------------------------------------------------------ workers

  /**
   * A claim; answers whether it parked on the way (its caller may then have gone meanwhile). With
   * a `waitId` its caller may call it off (abortWait, call-offs.ts).
   */
  claim(req: Claim & { worker?: WorkerInfo | null }, waitId?: string) {
    this.rows.claims++;
    this.workers.heard(req.workerId, req.worker);
    if (waitId !== undefined && this.callOffs.overtaken(waitId))
      return Promise.resolve({ ok: true as const, value: { claimed: [] as Claimed[], parked: false } });
    return this.calls.waiting(waitId, async (signal) => {
      let parked = false;
      const got = await this.engine.work.claimMany(this.ns, this.queue, { ...req, signal, onPark: () => (parked = true) });
      return { claimed: await this.callOffs.handing(req.workerId, waitId, signal, got), parked };
    });
  }

  /** A worker's acks (of this queue's invocations) and its next claim, in one D1 batch. */
  ackAndClaim(acks: AckRequest[], req: Claim & { worker?: WorkerInfo | null }) {
    this.workers.heard(req.workerId, req.worker);
    return this.calls.run(() => this.engine.work.ackAndClaim(this.ns, this.queue, acks, req));
  }

  /** Jobs a worker claimed and never started, back to the queue uncharged (Work.giveBack). */
  release(workerId: string, items: { id: string; attempt: number | null }[]) {
    this.workers.heard(workerId);
    return this.calls.run(() => this.engine.work.giveBack(this.ns, this.queue, workerId, items));
  }

  ackMany(items: AckRequest[]) {
    this.workers.heard(items[0]?.workerId);
    return this.calls.run(() => this.engine.work.ackMany(this.ns, ofQueue(items, this.queue)));
  }

  nackMany(items: (NackRequest & { id: string })[]) {
    this.workers.heard(items[0]?.workerId);
    return this.calls.run(() => this.engine.work.nackMany(this.ns, ofQueue(items, this.queue)));
  }

  ack(id: string, req: HolderRequest & { result?: unknown }) {
    this.workers.heard(req.workerId);
    return this.calls.run(() => this.engine.work.ack(this.ns, id, { ...req, queue: this.queue }));
  }

  nack(id: string, req: NackRequest) {
    this.workers.heard(req.workerId);
    return this.calls.run(() => this.engine.work.nack(this.ns, id, { ...req, queue: this.queue }));
  }

  heartbeat(id: string, req: HolderRequest & { leaseMs?: unknown }) {
    this.workers.heard(req.workerId);
    return this.calls.run(() => this.engine.work.heartbeat(this.ns, id, { ...req, queue: this.queue }));
  }

  append(id: string, req: AppendRequest) {
    return this.calls.run(() => this.engine.journal.append(this.ns, id, { ...req, queue: this.queue }));
  }

  /** The feed's and journals' SSE streams, as fetches whose bodies the Worker relays (queue-streams.ts). */
  override async fetch(req: Request): Promise<Response> {
    return (await this.calls.unready()) ?? this.streams.fetch(req);
  }

  /** The next page of a journal after `since`, waiting up to `timeoutMs` for one (a JSON read with wait_ms). */
  follow(id: string, since: unknown, timeoutMs: unknown, limit?: unknown, waitId?: string) {
    return this.calls.waiting(waitId, (signal) => this.engine.journal.follow(this.ns, id, since, timeoutMs, signal, limit, this.queue));
  }

  /** Calls off a wait this caller started with `waitId`, its client gone (call-offs.ts); false if none was. */
  async abortWait(waitId: string): Promise<boolean> {
    return this.calls.begun(() => this.callOffs.callOff(waitId));
  }

  /** The workers heard from here, and the running jobs each holds (read from the rows). */
  workersSeen() {
    return this.calls.run(async () => {
      const running = await this.engine.list(this.ns, this.queue, 'running', 1000, null);
      return { workers: this.workers.list(), running: running.items.map((i) => ({ id: i.id, workerId: i.workerId })) };
    });
  }

  /** The worker says it stops (its runtime, at shutdown). RPC methods are the prototype's: no arrow fields. */
  workerStopped(workerId: string) {
    return this.calls.begun(() => this.workers.stopped(workerId));
  }
  /** Log lines of the worker's jobs, for the feed's readers (checked by the route: core/feed.ts logLines). */
  workerLog(workerId: string, lines: LogLine[]) {
    return this.calls.begun(() => this.engine.park.events.toldLog(this.ns, this.queue, workerId, lines));
  }

  /** This queue's transition counters since the object started, its jobs finished lately and its pusher's figures (they live in its memory). */
  counters() {
    return this.calls.begun(() => {
      const feed = this.engine.park.events;
      const [c] = feed.counters(this.ns, this.queue);
      return { since: feed.since, counts: c?.counts ?? null, recent: feed.recent(this.ns, this.queue), pushing: this.pushing.stats() };
    });
  }

  /** D1 rows read and written by this object so far (D1's own result metadata). */
  stats() {
    return this.calls.begun(() => ({
      ...this.rows,
      d1_ms: this.port.busyMs,
      shard: this.place.shard,
      d1_model: modelCounters(),
      token_reads: tokenReads(),
      waiters: this.engine.park.waiters.size,
      streams: this.streams.journals.size,
      feed_readers: this.streams.feed.size,
      push: this.pushing.stats(),
    }));
  }

  // ------------------------------------------------------------ leases

  override async alarm(): Promise<void> {
    this.alarmAt = null;
    if (this.place.fenced) return this.place.alarmed();
    // Its first alarm since it was made (or since a move) starts it, sweeping; a throw is retried by the platform.
    const startedNow = !this.place.ready && (await this.place.prepare());
    // Its start found a move copying its namespace.
    if (this.place.fenced) return this.place.alarmed();
    if (!startedNow) await this.sweep();
    // Retention, when due; the first alarm of this instance looks too (the purge alarm it had may be the one firing).
    const purge = await this.retention.due();
    if (purge !== null) this.armAlarm(purge);
    if (await this.pushing.awake(!!this.settings?.claimsPerSecond)) this.armAlarm(Date.now() + KEEP_AWAKE_MS);
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

  /** Another queue's parked claims look again (its rows changed: a dead letter, a redriven job). */
  private pokeQueue(queue: string): void {
    const other = (this.env.QUEUE as unknown as DurableObjectNamespace<QueueObject>).getByName(queueObjectName(this.ns, queue));
    this.ctx.waitUntil(other.poke().catch(() => {}));
  }

  private armAlarm(deadline: number): void {
    if (this.alarmAt !== null && this.alarmAt <= deadline) return;
    this.alarmAt = deadline;
    void this.ctx.storage.setAlarm(deadline);
  }
}
