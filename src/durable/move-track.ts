/**
 * What changed in a namespace while its move copied it (mover.ts): the jobs written on the shard
 * it leaves after the move began, so that the move copies again those and no others, and the
 * fence lasts as long as what changed in its last moments, not as long as the namespace is large.
 *
 * SQLite notes them itself: before the copy reads a row, the move puts triggers on the source
 * shard, named by the namespace and matching its rows only, that note the id of every job of it
 * inserted, updated or deleted, or whose frames or journal note were, in `lakeshore_move_changes`,
 * marked dirty. A trigger runs inside the statement that writes, so no write of any path (a queue
 * object's batch, retention, a deletion by the Worker) commits unnoted. The move catches up while
 * the namespace works by marking a page of notes clean before it reads their jobs: a write after
 * that marks its job dirty again, for the next round or the fence. The triggers are there only
 * while the namespace moves: the rest of the time no write on any shard pays for them. Once the
 * move ends (switched or undone) they are dropped and the notes deleted, a bounded unit at a time.
 */
import type { Metered, Stmt } from './metered.ts';

/** The ids of the jobs that changed, by namespace (a job's id is unique within its namespace). */
export const CHANGES = 'lakeshore_move_changes';
/** Notes a unit of catching up, or of comparing under the fence, reads at most. */
export const NOTES_PAGE = 500;
/** Notes deleted a unit once the move ended. */
const UNTRACK_ROWS = 5_000;
const TABLE = `CREATE TABLE IF NOT EXISTS ${CHANGES} (ns TEXT NOT NULL, id TEXT NOT NULL, dirty INTEGER NOT NULL DEFAULT 1, PRIMARY KEY (ns, id)) WITHOUT ROWID`;
/** A note's upsert: dirty again if it was there. */
const UPSERT = `ON CONFLICT (ns, id) DO UPDATE SET dirty = 1`;

/** A namespace as an SQL string literal (names hold no quote, but a literal never trusts that). */
const literal = (ns: string) => `'${ns.replaceAll("'", "''")}'`;
const hex = (ns: string) => Array.from(new TextEncoder().encode(ns), (b) => b.toString(16).padStart(2, '0')).join('');

/** Each trigger: its table, its event, and which row of the table's it notes the job of. */
const TRIGGERS = [
  ['invocations', 'INSERT', 'NEW', 'row'],
  ['invocations', 'UPDATE', 'NEW', 'row'],
  ['invocations', 'DELETE', 'OLD', 'row'],
  ['frames', 'INSERT', 'NEW', 'job'],
  ['frames', 'UPDATE', 'NEW', 'job'],
  ['frames', 'DELETE', 'OLD', 'job'],
  ['journals_due', 'INSERT', 'NEW', 'job'],
  ['journals_due', 'DELETE', 'OLD', 'job'],
] as const;

/** What starting to note costs (a statement each), and each unit of ending it. */
export const TRACK_COST = TRIGGERS.length + 1;
export const UNTRACK_COST = TRIGGERS.length + 2;

const triggerName = (ns: string, table: string, event: string) => `"lakeshore_move_${hex(ns)}_${table}_${event.toLowerCase()}"`;

/** The statements that start noting the namespace's changes on its shard (run again, they change nothing). */
export function trackStmts(ns: string): Stmt[] {
  const n = literal(ns);
  return [
    { sql: TABLE, args: [] },
    ...TRIGGERS.map(([table, event, row, of]) => {
      // A job's row names its namespace; a frame or a note names its job by row number.
      const note =
        of === 'row'
          ? `INSERT INTO ${CHANGES} (ns, id) VALUES (${row}.ns, ${row}.id) ${UPSERT}`
          : `INSERT INTO ${CHANGES} (ns, id) SELECT ns, id FROM invocations WHERE rid = ${row}.inv AND ns = ${n} ${UPSERT}`;
      const when = of === 'row' || table === 'journals_due' ? `WHEN ${row}.ns = ${n}` : '';
      return {
        sql: `CREATE TRIGGER IF NOT EXISTS ${triggerName(ns, table, event)} AFTER ${event} ON ${table} ${when} BEGIN ${note}; END`,
        args: [],
      };
    }),
  ];
}

/** Ends the noting: its triggers dropped, then its notes deleted a unit at a time. Answers done once none is left. */
export async function untrackUnit(db: Metered, ns: string): Promise<{ done: boolean }> {
  const [, ...rest] = await db.batch([
    { sql: TABLE, args: [] },
    ...TRIGGERS.map(([table, event]) => ({ sql: `DROP TRIGGER IF EXISTS ${triggerName(ns, table, event)}`, args: [] })),
    {
      sql: `DELETE FROM ${CHANGES} WHERE ns = ?1 AND id IN (SELECT id FROM ${CHANGES} WHERE ns = ?1 LIMIT ${UNTRACK_ROWS})`,
      args: [ns],
    },
  ]);
  return { done: (rest.at(-1)!.meta.changes ?? 0) < UNTRACK_ROWS };
}

/** The next page of the ids noted dirty, after `after` (and up to `until`, if given). */
export async function changedIds(db: Metered, ns: string, after: string, most: number, until: string | null = null): Promise<string[]> {
  const rows = await db.all<{ id: string }>(
    `SELECT id FROM ${CHANGES} WHERE ns = ?1 AND id > ?2 ${until === null ? '' : 'AND id <= ?3'} AND dirty = 1 ORDER BY id LIMIT ${most}`,
    ns,
    after,
    ...(until === null ? [] : [until]),
  );
  return rows.map((r) => r.id);
}

/** The last id noted dirty now (null: none): where a round of catching up ends, however many are noted during it. */
export async function lastDirty(db: Metered, ns: string): Promise<string | null> {
  return (await db.first<{ id: string | null }>(`SELECT max(id) AS id FROM ${CHANGES} WHERE ns = ?1 AND dirty = 1`, ns))?.id ?? null;
}

/** Marks these notes clean, before their jobs are read and copied (a write after this marks one dirty again). */
export const cleanStmt = (ns: string, ids: string[]): Stmt => ({
  sql: `UPDATE ${CHANGES} SET dirty = 0 WHERE ns = ?1 AND id IN (SELECT value FROM json_each(?2))`,
  args: [ns, JSON.stringify(ids)],
});
