/**
 * The local plane's operator verbs: overview, metrics, storage, listings, queue settings,
 * schedules, purges and the feed, as HttpOperators speaks them to the edge plane.
 */
import type { Engine } from '../../src/core/engine.ts';
import type { Limits } from '../../src/core/limits.ts';
import type { PushTarget } from '../../src/core/push-target.ts';
import type { PushStats } from '../../src/core/push.ts';
import * as v from '../../src/core/validate.ts';
import { asClientError } from '../errors.ts';
import type {
  FeedItem,
  FeedOptions,
  InvocationPage,
  InvocationSummary,
  ListOptions,
  LogLine,
  QueueInfo,
  QueueOverview,
  QueuePage,
  Schedule,
  ScheduleOptions,
  SettingsChange,
  StorageState,
  WorkerSeen,
} from '../types.ts';
import type { LocalClocks } from './clocks.ts';
import type { FeedLog } from './feed-log.ts';
import { kindsOf, localMetrics, type LocalWorkers } from './observe.ts';
import type { DatabaseSync } from './sqlite.ts';
import type { LocalPlane } from './open.ts';

/** Runs a verb, re-raising plane errors as their client classes. */
export async function verb<T>(p: Promise<T>): Promise<T> {
  try {
    return await p;
  } catch (e) {
    throw asClientError(e);
  }
}

export class LocalOperators {
  readonly namespace: string;
  readonly db: DatabaseSync;
  protected readonly engine: Engine;
  protected readonly now: () => number;
  protected readonly clocks: LocalClocks;
  protected readonly workersSeen: LocalWorkers;
  protected readonly feedLog: FeedLog;

  constructor(p: LocalPlane) {
    this.namespace = p.namespace;
    this.db = p.db;
    this.engine = p.engine;
    this.now = p.now;
    this.clocks = p.clocks;
    this.workersSeen = p.workersSeen;
    this.feedLog = p.feedLog;
  }

  overview(queues?: string[]): Promise<QueueOverview[]> {
    return verb(this.engine.overview(this.namespace, queues));
  }

  overviewPage(opts: { after?: string | null; limit?: number } = {}): Promise<QueuePage> {
    return verb(this.engine.overviewPage(this.namespace, opts.after, opts.limit));
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

  workerStopped = (queue: string, workerId: string): Promise<void> => verb((async () => this.workersSeen.stopped(queue, workerId))());
  workerLog = (queue: string, workerId: string, lines: LogLine[]): Promise<void> => verb(this.workersSeen.log(queue, workerId, lines));

  getMany(ids: string[]): Promise<(InvocationSummary | null)[]> {
    return verb(this.engine.getMany(this.namespace, ids));
  }

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
    if (s.retentionMs !== undefined || s.journalRetentionMs !== undefined) {
      this.clocks.clock(this.namespace, queue).soon(true);
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

  purge(queue: string, opts: { state: 'succeeded' | 'failed' | 'cancelled'; limit?: number }): Promise<number> {
    return verb(this.engine.admin.purgeFinished(this.namespace, queue, opts?.state, opts?.limit));
  }
}
