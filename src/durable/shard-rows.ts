/**
 * A namespace's rows on one shard, whole, deleted a bounded unit at a time: a move's partial copy,
 * or the copy on the shard it left.
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
