/**
 * The storage port on node:sqlite: each batch is one BEGIN IMMEDIATE transaction, so concurrent
 * processes on the same file serialize their transitions through SQLite's write lock.
 *
 * The driver is synchronous, so each batch first gives the event loop a turn. A batch that finds
 * the lock taken does not sleep inside SQLite (its busy handler waits 1, 2, 5, 10 ms... while the
 * other process holds the lock for a fraction of a millisecond): it gives the event loop a turn
 * and tries again, backing off to 1 ms, for up to `busyTimeoutMs`.
 */
import type { DatabaseSync, StatementSync } from 'node:sqlite';
import type { Port, Stmt, StmtResult } from '../../src/core/port.ts';

const RETURNS = /^\s*(SELECT|WITH)\b|\bRETURNING\b/i;
/** A statement that only reads (its `changes` count the rows it read). */
const READS = /^\s*SELECT\b/i;

export class SqlitePort implements Port {
  readonly db: DatabaseSync;
  private readonly cache = new Map<string, StatementSync>();

  private readonly busyTimeoutMs: number;

  constructor(db: DatabaseSync, busyTimeoutMs = 10_000) {
    this.db = db;
    this.busyTimeoutMs = busyTimeoutMs;
  }

  async batch(stmts: Stmt[]): Promise<StmtResult[]> {
    // node:sqlite is synchronous: without a turn of the event loop per batch, a caller that
    // submits in a loop would never let its process's timers and I/O run (its stdout stalled).
    await new Promise((r) => setImmediate(r));
    const deadline = Date.now() + this.busyTimeoutMs;
    for (let attempt = 0; ; attempt++) {
      try {
        return this.batchSync(stmts);
      } catch (e) {
        if (!isBusy(e) || Date.now() > deadline) throw e;
        await new Promise((r) => (attempt < 8 ? setImmediate(r) : setTimeout(r, 1)));
      }
    }
  }

  /**
   * Statements that ride along in the next batch, ahead of its own (the feed's rows: feed-log.ts),
   * so they cost no transaction of their own while transitions are being made. A rider never fails
   * the batch it rides: it is undone alone. A batch that waits on the lock keeps them for its retry.
   */
  riders: Stmt[] = [];

  /**
   * Runs last in every batch that changed a row, inside its transaction, when set (the feed's
   * place for what the batch tells: feed-log.ts); `sealed` gets its rows once the batch committed.
   * Like a rider it never fails the batch: undone alone.
   */
  seal: { stmt: Stmt; sealed(rows: Record<string, unknown>[]): void } | null = null;

  batchSync(stmts: Stmt[]): StmtResult[] {
    const riders = this.riders;
    this.riders = [];
    try {
      this.db.exec('BEGIN IMMEDIATE');
    } catch (e) {
      this.riders = riders.concat(this.riders);
      throw e;
    }
    let out: StmtResult[];
    let sealed: Record<string, unknown>[] | null = null;
    try {
      if (riders.length) {
        this.db.exec('SAVEPOINT riders');
        try {
          for (const r of riders) this.one(r);
          this.db.exec('RELEASE riders');
        } catch {
          this.db.exec('ROLLBACK TO riders');
          this.db.exec('RELEASE riders');
        }
      }
      out = stmts.map((s) => this.one(s));
      if (this.seal && out.some((r, i) => r.changes > 0 && !READS.test(stmts[i]!.sql))) sealed = this.sealWith(this.seal.stmt);
      this.db.exec('COMMIT');
    } catch (e) {
      this.db.exec('ROLLBACK');
      throw e;
    }
    if (sealed) this.seal?.sealed(sealed);
    // The file's size after the batch, as D1 reports `size_after` (core/storage.ts).
    if (out.length) out[out.length - 1]!.sizeAfter = this.size();
    return out;
  }

  private sealWith(s: Stmt): Record<string, unknown>[] | null {
    this.db.exec('SAVEPOINT seal');
    try {
      const rows = this.one(s).rows;
      this.db.exec('RELEASE seal');
      return rows;
    } catch {
      this.db.exec('ROLLBACK TO seal');
      this.db.exec('RELEASE seal');
      return null;
    }
  }

  /** Reads with no write lock (a reader of the feed, say): each statement sees what has committed. */
  read(s: Stmt): Record<string, unknown>[] {
    return this.one(s).rows;
  }

  private pageSize = 0;
  private pageCount: StatementSync | null = null;
  /** The database's size in bytes: pages (free ones too, as the file holds them) times page size. */
  size(): number {
    this.pageCount ??= this.db.prepare('PRAGMA page_count');
    if (!this.pageSize) this.pageSize = Number((this.db.prepare('PRAGMA page_size').get() as { page_size: number }).page_size);
    return Number((this.pageCount.get() as { page_count: number }).page_count) * this.pageSize;
  }

  private one(s: Stmt): StmtResult {
    let st = this.cache.get(s.sql);
    if (!st) {
      st = this.db.prepare(s.sql);
      this.cache.set(s.sql, st);
    }
    if (RETURNS.test(s.sql)) {
      const rows = st.all(...s.args) as Record<string, unknown>[];
      return { rows, changes: rows.length, rowsRead: 0, rowsWritten: 0 };
    }
    const r = st.run(...s.args);
    return { rows: [], changes: Number(r.changes), rowsRead: 0, rowsWritten: 0 };
  }
}

/** SQLITE_BUSY: another connection holds the write lock. */
const isBusy = (e: unknown) => (e as { errcode?: number }).errcode === 5;
