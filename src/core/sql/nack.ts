/** nack: the holding worker gives its attempt up, back to queued (retry) or to failed. */
import { followUp, type Plan } from '../plan.ts';
import { stmt } from '../port.ts';
import type { InvocationError } from '../types.ts';
import type { Finished } from './ack.ts';
import { diagnose, HELD, sameHolder, staleError, type Holder } from './fence.ts';

export function nackPlan(now: number, ns: string, id: string, queue: string | null, h: Holder, error: InvocationError, retry: boolean): Plan<Finished> {
  const to = retry ? 'queued' : 'failed';
  return {
    stmts: [
      stmt(
        `UPDATE invocations SET state = ?6, error = ?7, lease_until = NULL, updated_at = ?8,
                finished_at = CASE WHEN ?6 = 'failed' THEN ?8 ELSE NULL END
          WHERE ${HELD} RETURNING queue`,
        ns, id, queue, h.workerId, h.attempt, to, JSON.stringify(error), now,
      ),
    ],
    done: ([u]) => {
      const row = u!.rows[0];
      if (row) return { queue: String(row.queue), state: to, absorbed: false };
      return followUp(
        diagnose(ns, id, queue, (r) => {
          if (r.state === to && sameHolder(r, h)) return { queue: r.queue, state: to, absorbed: true };
          throw staleError('nack', id, r, h);
        }),
      );
    },
  };
}
