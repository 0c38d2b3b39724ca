/**
 * Views for operators: a page of one queue's invocations in one state, and each queue's overview.
 *
 * A page is a keyset walk of the partial index of its state (schema.ts), never an OFFSET, so a
 * page deep in a queue of any depth reads about `limit` index entries and rows:
 *   queued     claim order: priority high first, then submit order   (invocations_queued)
 *   running    lease deadline, soonest first                          (invocations_running)
 *   delayed    due time, soonest first                                (invocations_delayed)
 *   succeeded, failed, cancelled: newest submitted first              (invocations_finished)
 * The cursor is the last row's sort key, opaque to callers (base64url JSON).
 *
 * The overview counts the live states (delayed, queued, running) through the same indexes: its
 * cost is the queue's backlog (index entries only). Of the finished states it counts every failed
 * job kept (what an operator looks for; their number is bounded by retention) and the succeeded
 * and cancelled ones up to FINISHED_COUNT_CAP each: a full count of those would read every one
 * kept, so past the cap the overview says "at least" (`capped`) and listing pages them.
 */
import { badRequest } from '../errors.ts';
import type { Plan } from '../plan.ts';
import { stmt, type Stmt } from '../port.ts';
import { toInvocation } from '../rows.ts';
import { STATES, type State } from '../states.ts';
import type { Invocation } from '../types.ts';
import { queueInfoPlan } from './configure.ts';
import { WORKER_ID } from './workers.ts';
import { FINISHED } from './finished.ts';
import type { QueueInfo } from '../types.ts';
import type { Recent } from '../feed.ts';
import type { PushStats } from '../push.ts';

/** An invocation in a listing: its row without the envelope and result bytes (get has those). */
export type InvocationSummary = Omit<Invocation, 'envelope' | 'result'>;

export interface Page {
  items: InvocationSummary[];
  /** Pass it back for the next page; null when this page was the last. */
  cursor: string | null;
}

/** A summary's columns (the row's, but for the envelope and result). */
export const COLUMNS = `id, ns, queue, key, priority, parent, state, attempt, ${WORKER_ID}, lease_until, error, created_at, updated_at, started_at, finished_at, run_at, expires_at, max_attempts, rid`;

/**
 * An error as a summary (a listing's item, get many's) carries it: whole up to SUMMARY_ERROR bytes,
 * else its type and the first 500 characters of its message, marked `truncated` (`get` answers
 * the whole). A page is up to 1,000 items and an error up to 1 MiB: cut in SQLite, a page's errors
 * stay within 8 MiB and the rest of each never leaves it.
 */
export const SUMMARY_ERROR = 8 << 10;

export function cutError(col: string): string {
  const message = `json_extract(${col}, '$.message')`;
  const cut = `CASE WHEN length(${message}) > 500 THEN substr(${message}, 1, 499) || '…' ELSE ${message} END`;
  return `CASE WHEN ${col} IS NULL OR length(${col}) <= ${SUMMARY_ERROR} OR NOT json_valid(${col}) THEN ${col}
    WHEN json_type(${col}, '$.type') = 'text'
      THEN json_object('type', substr(json_extract(${col}, '$.type'), 1, 200), 'message', ${cut}, 'truncated', json('true'))
    ELSE json_object('message', ${cut}, 'truncated', json('true')) END AS error`;
}

/** A listing's columns: COLUMNS with its error cut (cutError). */
const LIST_COLUMNS = COLUMNS.replace(', error,', `, ${cutError('error')},`);

export const summary = (r: Record<string, unknown>): InvocationSummary => {
  const { envelope: _e, result: _r, ...rest } = toInvocation(r);
  return rest;
};

type Key = [number | null, number];

const b64url = (s: string) => btoa(s).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
const encodeCursor = (state: State, key: Key) => b64url(JSON.stringify([state, ...key]));

function decodeCursor(state: State, cursor: string): Key {
  try {
    const v = JSON.parse(atob(cursor.replace(/-/g, '+').replace(/_/g, '/'))) as unknown;
    if (Array.isArray(v) && v.length === 3 && v[0] === state && (v[1] === null || typeof v[1] === 'number') && Number.isInteger(v[2]))
      return [v[1] as number | null, v[2] as number];
  } catch {
    /* below */
  }
  throw badRequest(`cursor is not one this listing of ${state} jobs gave out`);
}

/** The statements of one page: a keyset range per state; queued (mixed order) takes two ranges. */
function pageStmts(ns: string, queue: string, state: State, limit: number, after: Key | null): Stmt[] {
  const base = `SELECT ${LIST_COLUMNS} FROM invocations WHERE ns = ?1 AND queue = ?2`;
  switch (state) {
    case 'queued':
      if (!after) return [stmt(`${base} AND state = 'queued' ORDER BY priority DESC, rid LIMIT ?3`, ns, queue, limit)];
      // The rest of the cursor's priority level, then the lower levels: each an index range.
      return [
        stmt(`${base} AND state = 'queued' AND priority = ?4 AND rid > ?5 ORDER BY rid LIMIT ?3`, ns, queue, limit, after[0], after[1]),
        stmt(`${base} AND state = 'queued' AND priority < ?4 ORDER BY priority DESC, rid LIMIT ?3`, ns, queue, limit, after[0]),
      ];
    case 'running':
      return [
        stmt(
          `${base} AND state = 'running' AND (?4 IS NULL OR (lease_until, rid) > (?4, ?5)) ORDER BY lease_until, rid LIMIT ?3`,
          ns,
          queue,
          limit,
          after?.[0] ?? null,
          after?.[1] ?? 0,
        ),
      ];
    case 'delayed':
      return [
        stmt(
          `${base} AND state = 'delayed' AND (?4 IS NULL OR (run_at, rid) > (?4, ?5)) ORDER BY run_at, rid LIMIT ?3`,
          ns,
          queue,
          limit,
          after?.[0] ?? null,
          after?.[1] ?? 0,
        ),
      ];
    default:
      // SQLite uses a partial index only when the query's WHERE repeats its condition (FINISHED),
      // and the state is written in, not bound. The index is named: left to itself, the planner
      // walks the whole table backwards by rowid for the ORDER BY.
      return [
        stmt(
          `SELECT ${LIST_COLUMNS} FROM invocations INDEXED BY invocations_finished
          WHERE ns = ?1 AND queue = ?2 AND ${FINISHED} AND state = '${state}' AND rid < ?4 ORDER BY rid DESC LIMIT ?3`,
          ns,
          queue,
          limit,
          after?.[1] ?? Number.MAX_SAFE_INTEGER,
        ),
      ];
  }
}

const sortKey = (state: State, r: Record<string, unknown>): Key => {
  const rid = Number(r.rid);
  if (state === 'queued') return [Number(r.priority), rid];
  if (state === 'running') return [Number(r.lease_until), rid];
  if (state === 'delayed') return [Number(r.run_at), rid];
  return [null, rid];
};

/** A page of `queue`'s invocations in `state`, after `cursor` (from the previous page). */
export function listPlan(ns: string, queue: string, state: State, limit: number, cursor: string | null): Plan<Page> {
  const after = cursor === null ? null : decodeCursor(state, cursor);
  return {
    stmts: pageStmts(ns, queue, state, limit + 1, after),
    done: (rs) => {
      // One more than the page is read: it says whether another page follows.
      const rows = rs.flatMap((r) => r.rows).slice(0, limit + 1);
      const page = rows.slice(0, limit);
      const last = page[page.length - 1];
      return { items: page.map(summary), cursor: rows.length > limit && last ? encodeCursor(state, sortKey(state, last)) : null };
    },
  };
}

/** Succeeded and cancelled jobs are counted up to this many each (index entries read); past it the count says "at least". */
export const FINISHED_COUNT_CAP = 10_000;
const CAPPED_STATES = ['succeeded', 'cancelled'] as const;

export interface QueueOverview extends QueueInfo {
  /** Invocations in each state, from the rows (finished ones until retention purges them); succeeded and cancelled up to FINISHED_COUNT_CAP. */
  counts: Record<State, number>;
  /** The states whose count reached FINISHED_COUNT_CAP: there are at least that many. */
  capped: State[];
  /** Jobs finished lately, per 10 s, counted where the transitions run (feed.ts); filled in by the engine. */
  recent: Recent;
  /**
   * The figures of the pusher that pushes this queue's jobs from where the overview is answered
   * (the queue object on the edge plane; a local plane's own `startPushing`), filled in by the
   * engine; null where none runs.
   */
  pushing: PushStats | null;
  /** How long the longest-waiting queued job has waited (since it last became queued), ms; null when none waits. */
  oldestQueuedMs: number | null;
}

/** Each named queue's live counts, its oldest waiting job, and its settings. */
export function overviewPlan(now: number, ns: string, queues: string[]): Plan<Omit<QueueOverview, 'recent' | 'pushing'>[]> {
  const finished = (s: string) =>
    `FROM invocations INDEXED BY invocations_finished WHERE ns = ?1 AND queue = ?2 AND ${FINISHED} AND state = '${s}'`;
  // Queued is counted in the scan that finds the longest wait (below): one walk of the backlog, not two.
  const counts = STATES.filter((s) => s !== 'queued')
    .map((s) =>
      s === 'failed'
        ? `(SELECT count(*) ${finished(s)}) AS "${s}"`
        : // One more than the cap is read: it says whether the cap was reached.
          s === 'succeeded' || s === 'cancelled'
          ? `(SELECT count(*) FROM (SELECT 1 ${finished(s)} LIMIT ${FINISHED_COUNT_CAP + 1})) AS "${s}"`
          : `(SELECT count(*) FROM invocations WHERE ns = ?1 AND queue = ?2 AND state = '${s}') AS "${s}"`,
    )
    .join(', ');
  const per = queues.map((q) => ({
    stats: stmt(
      `SELECT ${counts}, waiting.n AS "queued", waiting.oldest AS oldest
       FROM (SELECT count(*) AS n, min(updated_at) AS oldest FROM invocations WHERE ns = ?1 AND queue = ?2 AND state = 'queued') AS waiting`,
      ns,
      q,
    ),
    info: queueInfoPlan(ns, q),
  }));
  return {
    stmts: per.flatMap((p) => [p.stats, ...p.info.stmts]),
    done: (rs) =>
      per.map((p, i) => {
        const row = rs[i * 2]!.rows[0]!;
        const info = p.info.done([rs[i * 2 + 1]!]) as QueueInfo;
        const oldest = row.oldest === null || row.oldest === undefined ? null : Math.max(0, now - Number(row.oldest));
        // Only the capped states' counts stop at the cap (their statements read one more); the others are exact.
        const cap = (s: State) => ((CAPPED_STATES as readonly State[]).includes(s) ? FINISHED_COUNT_CAP : Number.POSITIVE_INFINITY);
        const counts = Object.fromEntries(STATES.map((s) => [s, Math.min(Number(row[s] ?? 0), cap(s))])) as Record<State, number>;
        const capped = CAPPED_STATES.filter((s) => Number(row[s] ?? 0) > FINISHED_COUNT_CAP);
        return { ...info, counts, capped, oldestQueuedMs: oldest };
      }),
  };
}
