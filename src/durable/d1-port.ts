/**
 * The storage port on D1: a batch is one `db.batch()`, one round trip and one transaction. A queue
 * object's port learns its database (its namespace's shard) once it has read the directory, and
 * another one when a move switches the namespace.
 *
 * While a move copies the namespace, the port is fenced: no batch reaches any database, each
 * answers 503 `unavailable` (clients retry it), and `fence` resolves only once the batches that
 * were on their way have answered. That is the guarantee a move's copy rests on: after it, the old
 * shard sees no write of this object.
 *
 * Sessions (D1's Sessions API, docs/contract.md "Reads and replicas"): a port made with a
 * `session` (the Worker's reads) runs all its batches in one D1 session that starts from that
 * bookmark or constraint, so a deployment with read replication may serve them from a replica at
 * least as new; a port without one (a queue object's) runs each batch in a session of its own on
 * the primary. Either way `bookmark` is the newest D1 bookmark its batches answered: what a client
 * carries to read its own writes from a replica.
 */
import { LakeshoreError } from '../core/errors.ts';
import { platformError } from '../core/platform-errors.ts';
import type { Port, Stmt, StmtResult } from '../core/port.ts';

export class D1Port implements Port {
  private db: D1Database | null;
  /** Why batches are refused now (a move), or null. */
  private fencedBy: string | null = null;
  private inFlight = 0;
  private idle: (() => void)[] = [];

  /** The session the batches share (a port made with `session`), once the first batch opened it. */
  private shared: D1DatabaseSession | null = null;
  private readonly session: string | undefined;
  /** The newest D1 bookmark a batch answered, or null (no batch yet, or a binding without sessions). */
  bookmark: string | null = null;

  constructor(db: D1Database | null, opts: { session?: string } = {}) {
    this.db = db;
    this.session = opts.session;
  }

  /** From now on, batches go to `db`. */
  use(db: D1Database): void {
    this.db = db;
    this.shared = null;
    this.bookmark = null;
  }

  get fenced(): boolean {
    return this.fencedBy !== null;
  }

  /** Refuses every batch from now on (`why` is their error's message); resolves once none is in flight. */
  fence(why: string): Promise<void> {
    this.fencedBy = why;
    if (this.inFlight === 0) return Promise.resolve();
    return new Promise((r) => this.idle.push(r));
  }

  /** Batches go to `db` again. */
  unfence(db: D1Database): void {
    this.use(db);
    this.fencedBy = null;
  }

  /** Wall time spent waiting on D1, for profiling. */
  busyMs = 0;

  async batch(stmts: Stmt[]): Promise<StmtResult[]> {
    if (this.fencedBy !== null) throw new LakeshoreError('unavailable', this.fencedBy, { retryable: true });
    const t0 = Date.now();
    this.inFlight++;
    try {
      return await this.run(stmts);
    } catch (e) {
      // D1's passing failures (a connection lost, an overload) are answered so that clients retry.
      const passing = platformError(e);
      if (!passing) throw e;
      console.warn(passing.message);
      throw passing;
    } finally {
      this.busyMs += Date.now() - t0;
      if (--this.inFlight === 0) for (const r of this.idle.splice(0)) r();
    }
  }

  private async run(stmts: Stmt[]): Promise<StmtResult[]> {
    const db = this.db;
    if (!db) throw new Error('D1Port: no database yet (the queue object reads its shard from the directory first)');
    const on = this.sessionOn(db);
    const prepared = stmts.map((s) => on.prepare(s.sql).bind(...s.args));
    const results = prepared.length === 1 ? [await prepared[0]!.all()] : await on.batch(prepared);
    if (on !== db) {
      const b = (on as D1DatabaseSession).getBookmark();
      // Bookmarks sort as their databases' histories do: keep the newest.
      if (b && (this.bookmark === null || b > this.bookmark)) this.bookmark = b;
    }
    return results.map((r) => ({
      rows: (r.results ?? []) as Record<string, unknown>[],
      changes: r.meta?.changes ?? 0,
      rowsRead: r.meta?.rows_read ?? 0,
      rowsWritten: r.meta?.rows_written ?? 0,
      sizeAfter: (r.meta as { size_after?: number } | undefined)?.size_after,
    }));
  }

  /** Where a batch runs: the port's shared session, a session of its own on the primary, or the binding (no Sessions API). */
  private sessionOn(db: D1Database): D1Database | D1DatabaseSession {
    if (typeof db.withSession !== 'function') return db;
    if (this.session === undefined) return db.withSession('first-primary');
    this.shared ??= db.withSession(this.session);
    return this.shared;
  }
}
