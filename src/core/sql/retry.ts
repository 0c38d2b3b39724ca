/**
 * retry: failed -> queued, an explicit verb and the only way a terminal row moves again. The
 * row keeps its id (a producer's result() sees the new outcome) and its journal; its attempt
 * budget starts afresh (budget_from), its TTL and backoff are gone. A stale worker of an earlier
 * attempt is still fenced: the row is not running, and its next attempt has a new number.
 * Cancelled rows stay cancelled: cancelling was a decision, failing was not.
 */
import { refusedPlan } from './refused.ts';
import { followUp, type Plan } from '../plan.ts';
import { stmt } from '../port.ts';
import { FINISHED } from './finished.ts';

const RETRIED = `state = 'queued', budget_from = attempt, run_at = NULL, expires_at = NULL, lease_until = NULL, finished_at = NULL`;

export function retryPlan(now: number, ns: string, id: string, queue: string | null): Plan<{ queue: string }> {
  return {
    stmts: [
      stmt(
        `UPDATE invocations SET ${RETRIED}, updated_at = ?4 WHERE ns = ?1 AND id = ?2 AND (?3 IS NULL OR queue = ?3) AND state = 'failed' RETURNING queue`,
        ns,
        id,
        queue,
        now,
      ),
    ],
    done: ([u]) => {
      const row = u!.rows[0];
      if (row) return { queue: String(row.queue) };
      return followUp(refusedPlan('retry', ns, id, queue, 'only a failed invocation can be retried'));
    },
  };
}

/** redrive: retries up to `limit` failed rows of a queue, oldest first, through the index of failed rows. */
export const redrivePlan = (now: number, ns: string, queue: string, limit: number): Plan<string[]> => ({
  stmts: [
    stmt(
      `UPDATE invocations SET ${RETRIED}, updated_at = ?3
        WHERE rid IN (SELECT rid FROM invocations INDEXED BY invocations_finished WHERE ns = ?1 AND queue = ?2 AND ${FINISHED} AND state = 'failed' ORDER BY rid LIMIT ?4) AND state = 'failed'
        RETURNING id`,
      ns,
      queue,
      now,
      limit,
    ),
  ],
  done: ([u]) => u!.rows.map((r) => String(r.id)),
});

/**
 * A dead letter is an invocation a failed job's queue submitted to its dead-letter queue (see the
 * trigger in migration 0005): id `dead:<id>:<attempt>`, parent the failed id. Redriving a
 * dead-letter queue sends up to `limit` of its waiting dead letters back: each one's failed
 * parent is retried in its own queue, and the dead letter is cancelled (type Redriven). One batch.
 */
export const redriveDeadLettersPlan = (now: number, ns: string, dlq: string, limit: number): Plan<{ id: string; queue: string }[]> => {
  const letters = `SELECT parent FROM invocations WHERE ns = ?1 AND queue = ?2 AND state = 'queued' AND id LIKE 'dead:%' AND parent IS NOT NULL ORDER BY rid LIMIT ?4`;
  return {
    stmts: [
      stmt(
        `UPDATE invocations SET ${RETRIED}, updated_at = ?3 WHERE ns = ?1 AND state = 'failed' AND id IN (${letters}) RETURNING id, queue`,
        ns,
        dlq,
        now,
        limit,
      ),
      stmt(
        `UPDATE invocations SET state = 'cancelled', finished_at = ?3, updated_at = ?3,
                error = json_object('type', 'Redriven', 'message', 'its failed job ' || parent || ' was sent back to its queue')
          WHERE rid IN (SELECT rid FROM invocations WHERE ns = ?1 AND queue = ?2 AND state = 'queued' AND id LIKE 'dead:%' AND parent IS NOT NULL ORDER BY rid LIMIT ?4)
          RETURNING id`,
        ns,
        dlq,
        now,
        limit,
      ),
    ],
    done: ([r]) => r!.rows.map((x) => ({ id: String(x.id), queue: String(x.queue) })),
  };
};
