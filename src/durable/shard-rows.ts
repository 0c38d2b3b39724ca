/**
 * A namespace's rows on one shard, whole: deleting them a bounded unit at a time (a move's partial
 * copy, or the copy on the shard it left), and the prints both shards must agree on before a move
 * switches (copy.ts checks them a page at a time).
 */
import type { Metered } from './metered.ts';

/** A deleting unit: the first jobs of the namespace left, and at most this many of their frames. */
const DELETE_JOBS = 200;
const DELETE_FRAMES = 5_000;

/** What a deleting unit costs. */
export const DELETE_COST = 7;

/**
 * Deletes the namespace's first jobs left on `db` (by id) with their frames, a bounded number a
 * unit: at most DELETE_FRAMES frames, and the jobs among them whose frames are all gone. Once no
 * job is left, its other rows. Answers done when nothing of it is left.
 */
export async function deleteUnit(db: Metered, ns: string): Promise<{ done: boolean }> {
  const first = `SELECT rid FROM invocations WHERE ns = ?1 ORDER BY id LIMIT ${DELETE_JOBS}`;
  const [f, i] = await db.batch([
    {
      sql: `DELETE FROM frames WHERE rowid IN (SELECT f.rowid FROM (${first}) j JOIN frames f ON f.inv = j.rid LIMIT ${DELETE_FRAMES})`,
      args: [ns],
    },
    {
      sql: `DELETE FROM invocations WHERE rid IN (${first}) AND NOT EXISTS (SELECT 1 FROM frames WHERE inv = invocations.rid)`,
      args: [ns],
    },
  ]);
  const rows = (f!.meta.changes ?? 0) + (i!.meta.changes ?? 0);
  if (rows) return { done: false };
  await db.batch(
    ['journals_due', 'queue_levels', 'queues', 'schedules', 'workers'].map((t) => ({ sql: `DELETE FROM ${t} WHERE ns = ?1`, args: [ns] })),
  );
  return { done: true };
}

/**
 * What the copies of some jobs must agree on, as statements over `invocations i` for the jobs
 * `which` names: by queue and state, their count, bytes, attempts, workers, priorities and times;
 * their frames (count, bytes, seqs); their journal notes. Two prints equal when the rows do (short
 * of changes that cancel out in every sum at once).
 */
export function printStmts(which: string, args: unknown[]): { sql: string; args: unknown[] }[] {
  return [
    {
      sql: `SELECT i.queue, i.state, count(*) AS n, total(length(i.envelope)) AS e, total(ifnull(length(i.result), -1)) AS r,
                   total(ifnull(length(i.error), -1)) AS x, total(i.attempt) AS a, total(ifnull(i.worker, 0)) AS w,
                   total(i.priority) AS p, total(i.updated_at) AS u, total(ifnull(i.lease_until, 0)) AS l
              FROM invocations i WHERE ${which} GROUP BY i.queue, i.state ORDER BY i.queue, i.state`,
      args,
    },
    {
      sql: `SELECT count(*) AS n, total(length(f.body)) AS b, total(f.seq) AS s FROM invocations i JOIN frames f ON f.inv = i.rid WHERE ${which}`,
      args,
    },
    { sql: `SELECT count(*) AS n, total(d.finished_at) AS f FROM invocations i JOIN journals_due d ON d.inv = i.rid WHERE ${which}`, args },
  ];
}

/** A print's results as one string, and the jobs and frames it counted. */
export function printOf(results: D1Result[]): { print: string; jobs: number; frames: number } {
  const [jobs, frames, due] = results.map((r) => r.results as Record<string, number>[]);
  return {
    print: JSON.stringify([jobs, frames, due]),
    jobs: jobs!.reduce((n, r) => n + Number(r.n), 0),
    frames: Number(frames![0]!.n),
  };
}

/** Statements of a print. */
export const PRINT_COST = 3;
/** What the namespace's other tables must agree on: its settings, schedules, workers and levels. */
export async function restPrint(db: Metered, ns: string): Promise<string> {
  const row = await db.first(
    `SELECT (SELECT count(*) FROM queues WHERE ns = ?1) AS q, (SELECT count(*) FROM schedules WHERE ns = ?1) AS s,
            (SELECT count(*) || ':' || sum(n) || ':' || sum(length(name)) FROM workers WHERE ns = ?1) AS w,
            (SELECT group_concat(queue || ':' || priority || ':' || queued, '|') FROM queue_levels WHERE ns = ?1) AS l`,
    ns,
  );
  return JSON.stringify(row);
}
