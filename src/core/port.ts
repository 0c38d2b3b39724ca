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

export const stmt = (sql: string, ...args: SqlValue[]): Stmt => ({ sql, args });
