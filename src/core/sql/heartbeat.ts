import { followUp, type Plan } from '../plan.ts';
import { stmt } from '../port.ts';
import type { HeartbeatAnswer } from '../types.ts';
import { leaseExpr } from './claim.ts';
import { diagnose, HELD, sameHolder, staleError, type Holder } from './fence.ts';

/**
 * heartbeat: extend the holder's lease. A cancelled invocation answers `cancelled: true` to its
 * holder, so the worker learns to stop; anyone else's heartbeat is refused.
 */
export function heartbeatPlan(now: number, ns: string, id: string, queue: string | null, h: Holder, leaseMs: number | null, defaultLeaseMs: number): Plan<HeartbeatAnswer> {
  return {
    stmts: [
      stmt(
        `UPDATE invocations SET lease_until = ${leaseExpr('?6', '?7', '?1', 'invocations.queue', '?8')}, updated_at = ?6
          WHERE ${HELD} RETURNING lease_until`,
        ns, id, queue, h.workerId, h.attempt, now, leaseMs, defaultLeaseMs,
      ),
    ],
    done: ([u]) => {
      const row = u!.rows[0];
      if (row) return { leaseUntil: Number(row.lease_until), cancelled: false };
      return followUp(
        diagnose(ns, id, queue, (r) => {
          if (r.state === 'cancelled' && sameHolder(r, h)) return { leaseUntil: null, cancelled: true };
          throw staleError('heartbeat', id, r, h);
        }),
      );
    },
  };
}
