/** Plain reads: one row, its queue, a count, the queue names. Each answers from the rows themselves. */
import { followUp, type Plan } from '../plan.ts';
import { stmt } from '../port.ts';
import { toInvocation } from '../rows.ts';
import { COLUMNS, cutError, summary, type InvocationSummary } from './list.ts';
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
  .join(', ')
  .replace(', invocations.error,', `, ${cutError('invocations.error')},`);

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
 * Most result and error bytes one answer of a wait on many jobs carries, past its first job: the
 * answer crosses RPC from the queue object (32 MiB at most) and sits in an isolate (128 MB), and
 * 1,000 results of 1 MiB would be a gigabyte. Jobs past it are left for the caller's next ask.
 */
export const RESULTS_BYTES = 8 << 20;
/** A job whose result and error are at most this many bytes is answered from the first read (1,000 of them: 8 MiB). */
const INLINE_BYTES = 8 << 10;

type EndedRow = { id: string; state: State | null; result: unknown; error: unknown };

/**
 * Of `ids` (a JSON list), those of `queue` that have ended, with their outcome columns, and those `queue` does
 * not have (state null): what a wait on many jobs answers (results.ts). One statement by the (ns, id)
 * index, reading no more rows than before: a job whose values are larger than INLINE_BYTES comes
 * back without them (length() and the CASE read none of their bytes), and a follow-up reads those
 * that fit in RESULTS_BYTES with the rest (at least one), by rowid. `cut`: ended jobs were left out.
 */
export const endedPlan = (ns: string, queue: string, ids: string): Plan<{ rows: EndedRow[]; cut: boolean }> => {
  const n = 'ifnull(length(i.result), 0) + ifnull(length(i.error), 0)';
  return {
    stmts: [
      stmt(
        `SELECT j.value AS id, i.rid, i.state, ${n} AS n,
                CASE WHEN ${n} <= ${INLINE_BYTES} THEN i.result END AS result, CASE WHEN ${n} <= ${INLINE_BYTES} THEN i.error END AS error
           FROM json_each(?3) AS j LEFT JOIN invocations AS i ON i.ns = ?1 AND i.id = j.value AND i.queue = ?2
          WHERE i.state IS NULL OR i.${FINISHED}`,
        ns,
        queue,
        ids,
      ),
    ],
    done: ([r]) => {
      const rows: EndedRow[] = [];
      const large: { rid: number; at: number }[] = [];
      let bytes = 0;
      for (const x of r!.rows) {
        const row = { id: String(x.id), state: (x.state ?? null) as State | null, result: x.result, error: x.error };
        if (row.state === null || Number(x.n) <= INLINE_BYTES) {
          rows.push(row);
          bytes += Number(x.n ?? 0);
        } else large.push({ rid: Number(x.rid), at: rows.push(row) - 1 });
      }
      if (!large.length) return { rows, cut: false };
      // The large ones that fit, in the order asked (at least one when nothing else was answered).
      const sizes = new Map(r!.rows.map((x) => [Number(x.rid), Number(x.n)]));
      const take: typeof large = [];
      for (const l of large) {
        const size = sizes.get(l.rid)!;
        if (bytes + size > RESULTS_BYTES && (bytes > 0 || take.length)) break;
        take.push(l);
        bytes += size;
      }
      const left = new Set(large.slice(take.length).map((l) => l.at));
      if (!take.length) return { rows: rows.filter((_, i) => !left.has(i)), cut: true };
      return followUp({
        stmts: [endedValues(JSON.stringify(take.map((l) => l.rid)))],
        done: ([v]) => {
          const got = new Map(v!.rows.map((x) => [Number(x.rid), x]));
          // A job retried between the two reads is no longer ended: it is left out, as one that ended later would be.
          for (const l of take) {
            const x = got.get(l.rid);
            const row = rows[l.at]!;
            if (x) Object.assign(row, { state: x.state as State, result: x.result, error: x.error });
            else left.add(l.at);
          }
          return { rows: rows.filter((_, i) => !left.has(i)), cut: left.size > 0 };
        },
      });
    },
  };
};

/** The outcome columns of ended jobs, by rowid (`rids`, a JSON list): endedPlan's follow-up. */
export const endedValues = (rids: string) =>
  stmt(`SELECT rid, state, result, error FROM invocations WHERE rid IN (SELECT value FROM json_each(?1)) AND ${FINISHED}`, rids);

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

/**
 * One page of those names, in name order, after `after` (the last name of the page before; '' for
 * the first): `limit` of them, and `next` (this page's last name) when more follow, else null.
 */
export const queuesPagePlan = (ns: string, after: string, limit: number): Plan<{ queues: string[]; next: string | null }> => ({
  stmts: [
    stmt(
      `SELECT queue FROM (SELECT DISTINCT queue FROM queue_levels WHERE ns = ?1 AND queue > ?2
         UNION SELECT queue FROM queues WHERE ns = ?1 AND queue > ?2) ORDER BY 1 LIMIT ?3`,
      ns,
      after,
      limit + 1,
    ),
  ],
  done: ([r]) => {
    const names = r!.rows.map((x) => String(x.queue));
    return names.length > limit ? { queues: names.slice(0, limit), next: names[limit - 1]! } : { queues: names, next: null };
  },
});
