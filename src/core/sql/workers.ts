/**
 * A job's worker is stored as a number, its name once a namespace (schema.ts `workers`): a worker
 * id is often a host name and a pid, and every job it runs kept those bytes (migration 0018).
 * A claim registers its worker before it claims, in the same batch, unless the engine has seen
 * the name registered; the claim and the fencing guard turn the name into the number, and every
 * read turns the number back into the name (`worker_id`, as the rows were read before). A row
 * claimed before the migration has no number but its name in `worker_id` (migration 0018 says why).
 */
import { stmt, type Stmt } from '../port.ts';

/**
 * Numbers worker `name` in namespace `ns` unless it has a number: the next after the namespace's
 * highest (one step down the primary key). Two registrations of one name cannot both insert
 * (workers_ns_name), nor two names take one number (the primary key): a batch is a transaction
 * and its database has one writer.
 */
export const registerWorkerStmt = (ns: string, name: string): Stmt =>
  stmt(
    `INSERT OR IGNORE INTO workers (ns, n, name)
       VALUES (?1, COALESCE((SELECT max(n) FROM workers WHERE ns = ?1), 0) + 1, ?2)`,
    ns,
    name,
  );

/** SQL: the number of worker `name` (an expression) in namespace `ns`; NULL for a name never registered. */
export const workerNumber = (ns: string, name: string) => `(SELECT n FROM workers WHERE ns = ${ns} AND name = ${name})`;

/**
 * SQL: the name of the worker of row alias `t` (`t.`, or `invocations.`), for reads: by its
 * number, or on a row claimed before migration 0018 (or by a Worker of before it) its `worker_id`.
 */
export const workerName = (t = 'invocations.') =>
  `COALESCE((SELECT name FROM workers WHERE workers.ns = ${t}ns AND workers.n = ${t}worker), ${t}worker_id)`;

/** A select-list item: the row's worker by name, under the column name reads have always had. */
export const WORKER_ID = `${workerName()} AS worker_id`;

/**
 * An engine's memory of the workers it saw registered, by `workerKey`: each one's number once a
 * claim of it returned rows (null until then). A worker's number never changes and is never
 * undone (a move copies a namespace's workers with their numbers), so what is remembered holds.
 */
export type KnownWorkers = Map<string, number | null>;

export const workerKey = (ns: string, name: string) => `${ns}\u0000${name}`;

/**
 * What a claim by worker `name` runs first: its registration, unless `known` has it; `done`,
 * given the claim's rows once the batch is in, remembers it and, from the rows, its number.
 */
export function registration(
  known: KnownWorkers,
  ns: string,
  name: string,
): { stmts: Stmt[]; done: (claimed: Record<string, unknown>[]) => void } {
  const key = workerKey(ns, name);
  const stmts = known.has(key) ? [] : [registerWorkerStmt(ns, name)];
  return {
    stmts,
    done: (claimed) => {
      const n = claimed[0]?.worker;
      if (n !== null && n !== undefined) known.set(key, Number(n));
      else if (!known.has(key)) known.set(key, null);
    },
  };
}
