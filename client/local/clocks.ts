/**
 * The local plane's clocks: what a Durable Object's alarm and its wakes do on the edge plane,
 * done by one process on a SQLite file that others may share.
 *
 * - Alarms: at a queue's next moment (a due schedule tick, an expired lease, a delayed job come
 *   due, a TTL, a retention pass), its timed work runs, then the timer is armed again. A timer
 *   runs while this process has the plane open; a process that claims from a queue keeps it going.
 * - Other processes' commits: while something of this process waits (a parked claim, a result
 *   wait, a journal read), a cheap `PRAGMA data_version` check every `changeCheckMs` wakes the
 *   engine's waiters when another process has committed.
 */
import type { Engine } from '../../src/core/engine.ts';
import { RetentionClock } from '../../src/core/retention.ts';
import type { DatabaseSync } from './sqlite.ts';
import type { StatementSync } from 'node:sqlite';

export class LocalClocks {
  private readonly timers = new Map<string, { at: number; timer: ReturnType<typeof setTimeout> }>();
  /** When each queue's next retention pass is due (core/retention.ts). */
  private readonly retention = new Map<string, RetentionClock>();
  private readonly watched = new Set<string>();
  private watcher: ReturnType<typeof setInterval> | null = null;
  private dataVersion = -1;
  private closed = false;

  private readonly db: DatabaseSync;
  private readonly path: string;
  private readonly engine: Engine;
  private readonly now: () => number;
  private readonly changeCheckMs: number;

  constructor(db: DatabaseSync, path: string, engine: Engine, now: () => number, changeCheckMs: number) {
    this.db = db;
    this.path = path;
    this.engine = engine;
    this.now = now;
    this.changeCheckMs = changeCheckMs;
  }

  /** Watches for other processes' commits while `fn` may be parked, waking the engine's waiters. */
  async waiting<T>(fn: () => Promise<T>): Promise<T> {
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

  /** The queue's alarm at `at` (an earlier one armed already stands). */
  arm(ns: string, queue: string, at: number): void {
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
          if (at !== null) this.arm(ns, queue, at);
        } catch {
          /* the next claim sweeps the queue itself */
        }
      },
      Math.max(0, at - this.now()) + 5,
    );
    timer.unref?.();
    this.timers.set(key, { at, timer });
  }

  /** The retention clock of a queue (it arms this process's alarm for the queue). */
  clock(ns: string, queue: string): RetentionClock {
    const key = `${ns}\u0000${queue}`;
    let c = this.retention.get(key);
    if (!c)
      this.retention.set(
        key,
        (c = new RetentionClock(
          () => this.engine.admin.purge(ns, queue),
          this.now,
          (at) => this.arm(ns, queue, at),
        )),
      );
    return c;
  }

  /** A queue this process claims from: its alarm is armed for whatever it waits for (set by any process). */
  async watchQueue(ns: string, queue: string): Promise<void> {
    const key = `${ns}\u0000${queue}`;
    if (this.watched.has(key)) return;
    this.watched.add(key);
    const next = await this.engine.work.sweep(ns, queue);
    if (next !== null) this.arm(ns, queue, next);
    // Retention for what finished before this process watched the queue.
    await this.clock(ns, queue).due();
  }

  close(): void {
    this.closed = true;
    if (this.watcher) clearInterval(this.watcher);
    this.watcher = null;
    for (const t of this.timers.values()) clearTimeout(t.timer);
    this.timers.clear();
  }

  private watch(): void {
    if (this.watcher || this.closed || this.path === ':memory:') return;
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

  /** Prepared once: the watch asks every few milliseconds while a claim waits. */
  private dataVersionStmt: StatementSync | null = null;
  private version(): number {
    this.dataVersionStmt ??= this.db.prepare('PRAGMA data_version');
    return Number((this.dataVersionStmt.get() as { data_version: number }).data_version);
  }
}
