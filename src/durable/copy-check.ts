/**
 * Comparing a namespace's copy with its source, a page at a time (mover.ts): each side's jobs summed
 * by queue and state, their frames and their notes (its print, three statements), so no statement
 * reads more than a page.
 * Every job is compared once as it is: those not noted as changed while the namespace works
 * (`checkUnit`), those caught up in a round as soon as they are (`compareJobs`), and those still
 * dirty under the fence (`verifyUnit`), with the namespace's other tables. A difference undoes
 * the move.
 */
import { LakeshoreError } from '../core/errors.ts';
import type { Cursor, Unit } from './copy.ts';
import type { Metered } from './metered.ts';
import { CHANGES, changedIds, NOTES_PAGE } from './move-track.ts';

/** The two shards of a move, and its namespace. */
export interface Shards {
  readonly ns: string;
  readonly from: Metered;
  readonly to: Metered;
}

/** Jobs a unit of the check while the namespace works compares (each statement reads at most these, and their frames). */
const CHECK_PAGE = 2_000;
/** The verify's cursor once the jobs are done, for the other tables: a number, which no job's id is. */
const REST = 0;

const mismatch = (ns: string, what: string, a: string, b: string) =>
  new LakeshoreError('internal', `the copy of ${ns} does not match its source in ${what}: ${a.slice(0, 400)} vs ${b.slice(0, 400)}`);

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
/** What a unit of the check costs (its page's end, the notes and two prints), of the verify, and of comparing a page caught up. */
export const CHECK_COST = 2 + 2 * PRINT_COST;
export const VERIFY_COST = 1 + 2 * PRINT_COST;
export const COMPARE_COST = 1 + 2 * PRINT_COST;
/** What the namespace's workers numbered after `after` (up to `upTo`) must agree on. */
const workersPrint = `SELECT count(*) || ':' || total(n) || ':' || total(length(name)) FROM workers WHERE ns = ?1 AND n > ?2 AND n <= ?3`;

/**
 * What the namespace's other tables must agree on: its settings, schedules and levels, and its
 * workers numbered after `workersFrom` (those before were compared as they were copied, `compareWorkers`).
 */
export async function restPrint(db: Metered, ns: string, workersFrom: number): Promise<string> {
  const row = await db.first(
    `SELECT (SELECT count(*) FROM queues WHERE ns = ?1) AS q, (SELECT count(*) FROM schedules WHERE ns = ?1) AS s,
            (${workersPrint}) AS w,
            (SELECT group_concat(queue || ':' || priority || ':' || queued, '|') FROM queue_levels WHERE ns = ?1) AS l`,
    ns,
    workersFrom,
    Number.MAX_SAFE_INTEGER,
  );
  return JSON.stringify(row);
}

/** While the namespace works: its workers numbered after `after` up to `upTo`, just copied, compared on both shards. */
export async function compareWorkers(c: Shards, after: number, upTo: number): Promise<void> {
  const [a, b] = await Promise.all([c.from.first(workersPrint, c.ns, after, upTo), c.to.first(workersPrint, c.ns, after, upTo)]);
  if (JSON.stringify(a) !== JSON.stringify(b))
    throw mismatch(c.ns, `workers ${after + 1} to ${upTo}`, JSON.stringify(a), JSON.stringify(b));
}

/**
 * While the namespace works: these jobs, just caught up, compared on both shards, but those
 * written since (dirty again) and `skip` (its frames are owed: compared once they are copied).
 */
export async function compareJobs(c: Shards, ids: string[], skip: string | null): Promise<void> {
  const list = JSON.stringify(ids);
  const [dirty, ...src] = await c.from.batch([
    {
      sql: `SELECT id FROM ${CHANGES} WHERE ns = ?1 AND dirty = 1 AND id IN (SELECT value FROM json_each(?2))`,
      args: [c.ns, list],
    },
    ...printStmts(
      `i.ns = ?1 AND i.id IN (SELECT value FROM json_each(?2)) AND i.id <> ?3
         AND i.id NOT IN (SELECT id FROM ${CHANGES} WHERE ns = ?1 AND dirty = 1 AND id IN (SELECT value FROM json_each(?2)))`,
      [c.ns, list, skip ?? ''],
    ),
  ]);
  const written = JSON.stringify((dirty!.results as { id: string }[]).map((r) => r.id));
  const dst = await c.to.batch(
    printStmts(`i.ns = ?1 AND i.id IN (SELECT value FROM json_each(?2)) AND i.id <> ?3 AND i.id NOT IN (SELECT value FROM json_each(?4))`, [
      c.ns,
      list,
      skip ?? '',
      written,
    ]),
  );
  const [a, b] = [printOf(src), printOf(dst)];
  if (a.print !== b.print) throw mismatch(c.ns, `the jobs caught up from ${JSON.stringify(ids[0])}`, a.print, b.print);
}

/**
 * While the namespace works, after the copy: the next page of its jobs (by id) checked on both
 * shards, but those noted as changed (the fence copies and checks them again). A job not noted
 * was not written since the noting began, before the copy read it, so its copy must be as it is:
 * a difference is a copy gone wrong (or a row on the target the source never had), and the move
 * is undone.
 */
export async function checkUnit(c: Shards, cursor: Cursor): Promise<Unit> {
  const after = cursor ? String(cursor[0]) : '';
  const end =
    (
      await c.from.first<{ id: string }>(
        `SELECT id FROM invocations WHERE ns = ?1 AND id > ?2 ORDER BY id LIMIT 1 OFFSET ${CHECK_PAGE - 1}`,
        c.ns,
        after,
      )
    )?.id ?? null;
  const range = end === null ? `i.id > ?2` : `i.id > ?2 AND i.id <= ?3`;
  const args = end === null ? [c.ns, after] : [c.ns, after, end];
  // The notes and the print of the rest in one batch: one transaction, so they agree.
  const [noted, ...src] = await c.from.batch([
    { sql: `SELECT id FROM ${CHANGES} i WHERE ns = ?1 AND ${range}`, args },
    ...printStmts(`i.ns = ?1 AND ${range} AND i.id NOT IN (SELECT id FROM ${CHANGES} i WHERE ns = ?1 AND ${range})`, args),
  ]);
  const ids = JSON.stringify((noted!.results as { id: string }[]).map((r) => r.id));
  const dst = await c.to.batch(
    printStmts(`i.ns = ?1 AND ${range} AND i.id NOT IN (SELECT value FROM json_each(?${args.length + 1}))`, [...args, ids]),
  );
  const [a, b] = [printOf(src), printOf(dst)];
  if (a.print !== b.print) throw mismatch(c.ns, `jobs after ${JSON.stringify(after)}`, a.print, b.print);
  return { rows: a.jobs, cursor: end === null ? null : [end], done: end === null };
}

/**
 * Under the fence, once every change is caught up: the next page of the jobs noted as changed
 * checked on both shards (those the source no longer has, on neither), then the namespace's other
 * tables (of its workers, those numbered after `workersFrom`). With the check of the rest while it
 * worked, every job and every worker was checked once as it is.
 */
export async function verifyUnit(c: Shards, cursor: Cursor, workersFrom: number): Promise<Unit> {
  if (cursor?.[0] === REST) {
    const [a, b] = await Promise.all([restPrint(c.from, c.ns, workersFrom), restPrint(c.to, c.ns, workersFrom)]);
    if (a !== b) throw mismatch(c.ns, 'settings, schedules, workers or levels', a, b);
    return { rows: 0, cursor: null, done: true };
  }
  const after = cursor ? String(cursor[0]) : '';
  const ids = await changedIds(c.from, c.ns, after, NOTES_PAGE);
  if (!ids.length) return { rows: 0, cursor: [REST], done: false };
  const which = `i.ns = ?1 AND i.id IN (SELECT value FROM json_each(?2))`;
  const args = [c.ns, JSON.stringify(ids)];
  const [src, dst] = await Promise.all([c.from.batch(printStmts(which, args)), c.to.batch(printStmts(which, args))]);
  const [a, b] = [printOf(src), printOf(dst)];
  if (a.print !== b.print) throw mismatch(c.ns, `the jobs that changed after ${JSON.stringify(after)}`, a.print, b.print);
  return { rows: a.jobs, cursor: [ids.at(-1)!], done: false };
}
