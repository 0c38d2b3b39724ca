import { invocationNotFound } from '../errors.ts';
import { followUp, type Plan } from '../plan.ts';
import { stmt } from '../port.ts';

export interface Cancelled {
  cancelled: boolean;
  queue: string;
}

/** cancel: a delayed, queued or running row becomes cancelled. False when it had already ended. */
export function cancelPlan(now: number, ns: string, id: string, queue: string | null): Plan<Cancelled> {
  return {
    stmts: [
      stmt(
        `UPDATE invocations SET state = 'cancelled', error = json_object('message', 'cancelled', 'type', 'Cancelled'),
                lease_until = NULL, run_at = NULL, updated_at = ?4, finished_at = ?4
          WHERE ns = ?1 AND id = ?2 AND (?3 IS NULL OR queue = ?3) AND state IN ('delayed', 'queued', 'running')
          RETURNING queue`,
        ns,
        id,
        queue,
        now,
      ),
    ],
    done: ([u]) => {
      const row = u!.rows[0];
      if (row) return { cancelled: true, queue: String(row.queue) };
      return followUp({
        stmts: [stmt(`SELECT queue FROM invocations WHERE ns = ?1 AND id = ?2 AND (?3 IS NULL OR queue = ?3)`, ns, id, queue)],
        done: ([r]) => {
          const found = r!.rows[0];
          if (!found) throw invocationNotFound(id);
          return { cancelled: false, queue: String(found.queue) };
        },
      });
    },
  };
}
