/** Plain reads: one row, its queue, a count, the queue names. Each answers from the rows themselves. */
import type { Plan } from '../plan.ts';
import { stmt } from '../port.ts';
import { toInvocation } from '../rows.ts';
import { COLUMNS, summary, type InvocationSummary } from './list.ts';
import { isTerminal, STATES, type State } from '../states.ts';
import { FINISHED } from './finished.ts';
import { WORKER_ID } from './workers.ts';
import type { Invocation } from '../types.ts';

/** A row's columns as a read gives them: its worker by name, as before the worker became a number (sql/workers.ts). */
const ROW = `rid, id, ns, queue, key, priority, parent, envelope, state, attempt, ${WORKER_ID}, lease_until, result, error,
  created_at, updated_at, started_at, finished_at, trimmed, run_at, expires_at, max_attempts, budget_from`;

/** A summary's columns, each of the table (json_each has an id and a parent of its own). */
const SUMMARY = COLUMNS.split(', ')
  .map((c) => (/^\w+$/.test(c) ? `invocations.${c}` : c))
  .join(', ');

/** One row; with `queue` (a caller's hint), only if it is in that queue. */
export const getPlan = (ns: string, id: string, queue: string | null = null): Plan<Invocation | null> => ({
  stmts: [stmt(`SELECT ${ROW} FROM invocations WHERE ns = ?1 AND id = ?2 AND (?3 IS NULL OR queue = ?3)`, ns, id, queue)],
  done: ([r]) => (r!.rows[0] ? toInvocation(r!.rows[0]) : null),
});

/**
 * Each of `ids` (a JSON list) in its order: its row without envelope and result, or null where the
 * namespace has no such job. One statement, read by the (ns, id) index.
 */
export const getManyPlan = (ns: string, ids: string): Plan<(InvocationSummary | null)[]> => ({
  stmts: [
    stmt(
      `SELECT ${SUMMARY} FROM json_each(?2) AS j
         LEFT JOIN invocations ON invocations.ns = ?1 AND invocations.id = j.value ORDER BY j.key`,
      ns,
      ids,
    ),
  ],
  done: ([r]) => r!.rows.map((x) => (x.id === null || x.id === undefined ? null : summary(x))),
});

/**
 * Of `ids` (a JSON list), those of `queue` that have ended, with their outcome columns, and those `queue` does
 * not have (state null): what a wait on many jobs answers (results.ts). One statement, read by the
 * (ns, id) index.
 */
export const endedPlan = (
  ns: string,
  queue: string,
  ids: string,
): Plan<{ id: string; state: State | null; result: unknown; error: unknown }[]> => ({
  stmts: [
    stmt(
      `SELECT j.value AS id, i.state, i.result, i.error FROM json_each(?3) AS j
         LEFT JOIN invocations AS i ON i.ns = ?1 AND i.id = j.value AND i.queue = ?2
         WHERE i.state IS NULL OR i.${FINISHED}`,
      ns,
      queue,
      ids,
    ),
  ],
  done: ([r]) => r!.rows.map((x) => ({ id: String(x.id), state: (x.state ?? null) as State | null, result: x.result, error: x.error })),
});

/** Just the queue of an invocation: how the HTTP layer routes by id to the queue's object. */
export const queueOfPlan = (ns: string, id: string): Plan<string | null> => ({
  stmts: [stmt(`SELECT queue FROM invocations WHERE ns = ?1 AND id = ?2`, ns, id)],
  done: ([r]) => (r!.rows[0] ? String(r!.rows[0].queue) : null),
});

/**
 * Each state counted through its own partial index: the planner sees no parameter's value (port.ts),
 * so the state each branch counts is written in it, with a finished state's index condition.
 */
const COUNT = `SELECT CASE ?3 ${STATES.map(
  (st) =>
    `WHEN '${st}' THEN (SELECT count(*) FROM invocations WHERE ns = ?1 AND queue = ?2 AND ${isTerminal(st) ? `${FINISHED} AND ` : ''}state = '${st}')`,
).join(' ')} ELSE 0 END AS n`;

export const countPlan = (ns: string, queue: string, state: State): Plan<number> => ({
  stmts: [stmt(COUNT, ns, queue, state)],
  done: ([r]) => Number(r!.rows[0]?.n ?? 0),
});

/** Queue names of a namespace: from the level rows (every submit makes one) and the settings. */
export const queuesPlan = (ns: string): Plan<string[]> => ({
  stmts: [stmt(`SELECT DISTINCT queue FROM queue_levels WHERE ns = ?1 UNION SELECT queue FROM queues WHERE ns = ?1 ORDER BY 1`, ns)],
  done: ([r]) => r!.rows.map((x) => String(x.queue)),
});
