/**
 * The narrow storage port every plane implements: run statements in order, in one transaction.
 * D1 implements it with `db.batch()`, the local plane with node:sqlite inside BEGIN IMMEDIATE.
 */
export type SqlValue = string | number | null | Uint8Array;

export interface Stmt {
  sql: string;
  args: SqlValue[];
}

export interface StmtResult {
  rows: Record<string, unknown>[];
  /** Rows changed by an INSERT/UPDATE/DELETE (RETURNING rows for statements that return). */
  changes: number;
  /** Rows the database read and wrote for this statement, where the driver reports it (D1). */
  rowsRead: number;
  rowsWritten: number;
  /** The database's size in bytes after this statement, where the driver reports it (storage.ts). */
  sizeAfter?: number;
}

export interface Port {
  /** Runs the statements in order as one transaction. Rejects, having changed nothing, if any fails. */
  batch(stmts: Stmt[]): Promise<StmtResult[]>;
}

/**
 * A statement, its parameters written `+?N`. SQLite's query planner may read a bound value while
 * it plans (a LIMIT's; on Node 22's SQLite 3.54, the equality terms of a subquery with an ORDER
 * BY), and a statement whose plan read one is compiled again each time it is bound, whatever the
 * value. A parameter has no affinity, so `+?N` compares, sorts and stores as `?N` does; the
 * planner takes it as an expression it does not look into, and compiles each statement once. The
 * plans are the ones the indexes were made for: none depended on a value but the count of one
 * state (sql/read.ts), which now names its index's condition. Measured with
 * bench/planner-values.ts: a local worker's claim of 50 with its sweeps, then their ack, 1,846 →
 * 954 µs on Node's SQLite; a claim statement on workerd's D1, 300 → 100 µs of CPU.
 * test/model/planner.test.ts checks that no statement a producer or a worker runs shows a value.
 */
export const stmt = (sql: string, ...args: SqlValue[]): Stmt => ({ sql: opaque(sql), args });

const PARAM = /(?<![\w+?])\?(\d+)/g;
/** SQL texts already rewritten: the statements are a few hundred texts built again and again. */
const rewritten = new Map<string, string>();
function opaque(sql: string): string {
  let out = rewritten.get(sql);
  if (out === undefined) {
    out = sql.replace(PARAM, '+?$1');
    if (rewritten.size < 4096) rewritten.set(sql, out);
  }
  return out;
}
