/**
 * delete and purge: an operator's removal of finished jobs before their retention (sql/purge.ts)
 * would. Only finished rows (succeeded, failed, cancelled) go, each with its frames: a job still
 * delayed, queued or running is cancelled first, so no worker holds what disappears and nothing
 * acknowledged as waiting is lost. The levels (queue_levels) follow by their triggers.
 */
import { refusedPlan } from './refused.ts';
import { followUp, type Plan } from '../plan.ts';
import { stmt } from '../port.ts';
import { FINISHED } from './finished.ts';

/** The finished states, the ones delete and purge remove. */
export const FINISHED_STATES = Object.freeze(['succeeded', 'failed', 'cancelled'] as const);
export type FinishedState = (typeof FINISHED_STATES)[number];

/** delete: one finished job by id, and its frames. Missing: 404; not finished: 409. */
export function deletePlan(ns: string, id: string, queue: string | null): Plan<{ queue: string }> {
  const row = `ns = ?1 AND id = ?2 AND (?3 IS NULL OR queue = ?3) AND ${FINISHED}`;
  return {
    stmts: [
      stmt(`DELETE FROM frames WHERE inv IN (SELECT rid FROM invocations WHERE ${row})`, ns, id, queue),
      stmt(`DELETE FROM invocations WHERE ${row} RETURNING queue`, ns, id, queue),
    ],
    done: ([, d]) => {
      const gone = d!.rows[0];
      if (gone) return { queue: String(gone.queue) };
      return followUp(
        refusedPlan('delete', ns, id, queue, 'only a finished invocation (succeeded, failed or cancelled) can be deleted: cancel it first'),
      );
    },
  };
}

/** purge: up to `limit` finished jobs of one state of a queue, oldest submitted first, and their frames; answers how many. */
export function purgeStatePlan(ns: string, queue: string, state: FinishedState, limit: number): Plan<number> {
  const window = `SELECT rid FROM invocations INDEXED BY invocations_finished
    WHERE ns = ?1 AND queue = ?2 AND ${FINISHED} AND state = ?3 ORDER BY rid LIMIT ?4`;
  return {
    stmts: [
      stmt(`DELETE FROM frames WHERE inv IN (${window})`, ns, queue, state, limit),
      stmt(`DELETE FROM invocations WHERE rid IN (${window}) RETURNING rid`, ns, queue, state, limit),
    ],
    done: ([, d]) => d!.rows.length,
  };
}
