/** nack: the holding worker gives its attempt up, back to queued (retry) or to failed. */
import { followUp, type Plan } from '../plan.ts';
import { stmt } from '../port.ts';
import type { InvocationError } from '../types.ts';
import type { Finished } from './ack.ts';
import { diagnose, HELD, sameHolder, staleError, type Holder } from './fence.ts';
import { budget, exhausted } from './attempts.ts';

/**
 * A nack with retry queues the row again while it has attempts left; on its last attempt it
 * fails it (AttemptsExhausted, see attempts.ts), as a nack without retry does at once.
 */
export function nackPlan(now: number, ns: string, id: string, queue: string | null, h: Holder, error: InvocationError, retry: boolean, defaultMaxAttempts: number): Plan<Finished> {
  const again = `?6 = 1 AND attempt < ${budget('invocations', '?9')}`;
  return {
    stmts: [
      stmt(
        `UPDATE invocations
            SET state = CASE WHEN ${again} THEN 'queued' ELSE 'failed' END,
                error = CASE WHEN ?6 = 1 AND NOT (${again}) THEN ${exhausted('?7', 'attempt', budget('invocations', '?9'))} ELSE ?7 END,
                lease_until = NULL, updated_at = ?8, finished_at = CASE WHEN ${again} THEN NULL ELSE ?8 END
          WHERE ${HELD} RETURNING queue, state`,
        ns, id, queue, h.workerId, h.attempt, retry ? 1 : 0, JSON.stringify(error), now, defaultMaxAttempts,
      ),
    ],
    done: ([u]) => {
      const row = u!.rows[0];
      if (row) return { queue: String(row.queue), state: row.state as 'queued' | 'failed', absorbed: false };
      return followUp(
        diagnose(ns, id, queue, (r) => {
          // A repeat of a nack that landed: it left the row queued or failed (a retry on the last attempt fails it).
          if ((r.state === 'failed' || (retry && r.state === 'queued')) && sameHolder(r, h)) return { queue: r.queue, state: r.state, absorbed: true };
          throw staleError('nack', id, r, h);
        }),
      );
    },
  };
}
