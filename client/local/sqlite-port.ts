/**
 * The storage port on node:sqlite: each batch is one BEGIN IMMEDIATE transaction, so concurrent
 * processes on the same file serialize their transitions through SQLite's write lock.
 */
import { DatabaseSync, type StatementSync } from 'node:sqlite';
import type { Port, Stmt, StmtResult } from '../../src/core/port.ts';

const RETURNS = /^\s*(SELECT|WITH)\b|\bRETURNING\b/i;

export class SqlitePort implements Port {
  readonly db: DatabaseSync;
  private readonly cache = new Map<string, StatementSync>();

  constructor(db: DatabaseSync) {
    this.db = db;
  }

  async batch(stmts: Stmt[]): Promise<StmtResult[]> {
    return this.batchSync(stmts);
  }

  batchSync(stmts: Stmt[]): StmtResult[] {
    this.db.exec('BEGIN IMMEDIATE');
    try {
      const out = stmts.map((s) => this.one(s));
      this.db.exec('COMMIT');
      return out;
    } catch (e) {
      this.db.exec('ROLLBACK');
      throw e;
    }
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
