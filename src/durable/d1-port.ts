/** The storage port on D1: a batch is one `db.batch()`, one round trip and one transaction. */
import type { Port, Stmt, StmtResult } from '../core/port.ts';

export class D1Port implements Port {
  private readonly db: D1Database;

  constructor(db: D1Database) {
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
    const prepared = stmts.map((s) => this.db.prepare(s.sql).bind(...s.args));
    const results = prepared.length === 1 ? [await prepared[0]!.all()] : await this.db.batch(prepared);
    return results.map((r) => ({
      rows: (r.results ?? []) as Record<string, unknown>[],
      changes: r.meta?.changes ?? 0,
      rowsRead: r.meta?.rows_read ?? 0,
      rowsWritten: r.meta?.rows_written ?? 0,
    }));
  }
}
