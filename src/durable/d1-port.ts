/**
 * The storage port on D1: a batch is one `db.batch()`, one round trip and one transaction. A queue
 * object's port learns its database (its namespace's shard) once it has read the directory, and
 * another one when a move switches the namespace (`use`).
 */
import type { Port, Stmt, StmtResult } from '../core/port.ts';

export class D1Port implements Port {
  private db: D1Database | null;

  constructor(db: D1Database | null) {
    this.db = db;
  }

  /** From now on, batches go to `db`. */
  use(db: D1Database): void {
    this.db = db;
  }

  /** Wall time spent waiting on D1, for profiling. */
  busyMs = 0;

  async batch(stmts: Stmt[]): Promise<StmtResult[]> {
    const t0 = Date.now();
    try {
      return await this.run(stmts);
    } finally {
      this.busyMs += Date.now() - t0;
    }
  }

  private async run(stmts: Stmt[]): Promise<StmtResult[]> {
    const db = this.db;
    if (!db) throw new Error('D1Port: no database yet (the queue object reads its shard from the directory first)');
    const prepared = stmts.map((s) => db.prepare(s.sql).bind(...s.args));
    const results = prepared.length === 1 ? [await prepared[0]!.all()] : await db.batch(prepared);
    return results.map((r) => ({
      rows: (r.results ?? []) as Record<string, unknown>[],
      changes: r.meta?.changes ?? 0,
      rowsRead: r.meta?.rows_read ?? 0,
      rowsWritten: r.meta?.rows_written ?? 0,
      sizeAfter: (r.meta as { size_after?: number } | undefined)?.size_after,
    }));
  }
}
