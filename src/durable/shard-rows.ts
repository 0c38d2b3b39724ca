/**
 * A namespace's rows on one shard, whole: deleting them a bounded unit at a time (a move's partial
 * copy, or the copy on the shard it left), and the fingerprint both shards must agree on before a
 * move switches.
 */
import type { Metered } from './metered.ts';

/** A deleting unit: the first jobs of the namespace left, and at most this many of their frames. */
const DELETE_JOBS = 200;
const DELETE_FRAMES = 5_000;

/** What a deleting unit costs, and a fingerprint of both shards. */
export const DELETE_COST = 7;
export const FINGERPRINT_COST = 6;

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

/** What a copy must agree on: jobs by queue and state, their bytes and workers, frames and their bytes, settings, schedules and workers. */
export async function fingerprint(db: Metered, ns: string): Promise<string> {
  const [jobs, framesOf, rest] = await db.batch([
    {
      sql: `SELECT queue, state, count(*) AS n, sum(length(envelope)) AS e, sum(ifnull(length(result), 0)) AS r, sum(attempt) AS a,
                   sum(ifnull(worker, 0)) AS w
              FROM invocations WHERE ns = ?1 GROUP BY queue, state ORDER BY queue, state`,
      args: [ns],
    },
    { sql: `SELECT count(*) AS n, sum(length(f.body)) AS b FROM invocations i JOIN frames f ON f.inv = i.rid WHERE i.ns = ?1`, args: [ns] },
    {
      sql: `SELECT (SELECT count(*) FROM queues WHERE ns = ?1) AS q, (SELECT count(*) FROM schedules WHERE ns = ?1) AS s,
                   (SELECT count(*) FROM journals_due WHERE ns = ?1) AS j,
                   (SELECT count(*) || ':' || sum(n) || ':' || sum(length(name)) FROM workers WHERE ns = ?1) AS w,
                   (SELECT group_concat(queue || ':' || priority || ':' || queued, '|') FROM queue_levels WHERE ns = ?1) AS l`,
      args: [ns],
    },
  ]);
  return JSON.stringify([jobs!.results, framesOf!.results, rest!.results]);
}
