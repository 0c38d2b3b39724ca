/** nack: the holding worker gives its attempt up: waiting again (retry), or failed. */
import { followUp, type Plan } from '../plan.ts';
import { stmt } from '../port.ts';
import type { InvocationError } from '../types.ts';
import type { Finished } from './ack.ts';
import { diagnose, heldOne, holderArgs, sameHolder, staleError, type Holder } from './fence.ts';
import { backoff, budget, exhausted, spent } from './attempts.ts';

/**
 * A nack with retry puts the row back while it has attempts left: queued, or delayed for
 * `delayMs` (else its queue's backoff, else `defaultBackoff`: a stored backoff, the pusher's)
 * first; on its last attempt it fails it (AttemptsExhausted, see attempts.ts), as a nack without
 * retry does at once. `runAt` in the answer: when a delayed
 * row comes due.
 */
export function nackPlan(
  now: number,
  ns: string,
  id: string,
  queue: string | null,
  h: Holder,
  error: InvocationError,
  retry: boolean,
  defaultMaxAttempts: number,
  delayMs: number | null,
  defaultBackoff: string | null = null,
): Plan<Finished & { runAt: number | null }> {
  const again = `?7 = 1 AND x.n < x.max`;
  return {
    stmts: [
      stmt(
        `WITH x AS MATERIALIZED (
           SELECT r.rid, r.attempt, ${spent('r')} AS n, ${budget('r', '?9')} AS max, COALESCE(?10, ${backoff('r', '?11')}) AS delay
             FROM invocations r WHERE ${heldOne('r.')})
         UPDATE invocations
            SET state = CASE WHEN ${again} THEN (CASE WHEN x.delay > 0 THEN 'delayed' ELSE 'queued' END) ELSE 'failed' END,
                run_at = CASE WHEN ${again} AND x.delay > 0 THEN ?6 + x.delay END,
                error = CASE WHEN ?7 = 1 AND NOT (x.n < x.max) THEN ${exhausted('?8', 'x.n', 'x.max', 'x.attempt')} ELSE ?8 END,
                lease_until = NULL, updated_at = ?6, finished_at = CASE WHEN ${again} THEN NULL ELSE ?6 END
           FROM x WHERE invocations.rid = x.rid
          RETURNING invocations.queue, invocations.state, invocations.run_at`,
        ...holderArgs(now, ns, id, queue, h),
        retry ? 1 : 0,
        JSON.stringify(error),
        defaultMaxAttempts,
        delayMs,
        defaultBackoff,
      ),
    ],
    done: ([u]) => {
      const row = u!.rows[0];
      if (row)
        return {
          queue: String(row.queue),
          state: row.state as Finished['state'],
          absorbed: false,
          runAt: row.run_at === null ? null : Number(row.run_at),
        };
      return followUp(
        diagnose(ns, id, queue, (r) => {
          // A repeat of a nack that landed: it left the row waiting (queued or delayed) or failed.
          if ((r.state === 'failed' || (retry && (r.state === 'queued' || r.state === 'delayed'))) && sameHolder(r, h)) {
            return { queue: r.queue, state: r.state === 'failed' ? 'failed' : 'queued', absorbed: true, runAt: null };
          }
          throw staleError('nack', id, r, h);
        }),
      );
    },
  };
}
