import { followUp, type Plan } from '../plan.ts';
import { stmt } from '../port.ts';
import type { HeartbeatAnswer } from '../types.ts';
import { leaseExpr } from './claim.ts';
import { diagnose, heldOne, holderArgs, sameHolder, staleError, type Holder } from './fence.ts';

/**
 * heartbeat: extend the holder's lease, while it has not run out (a lease that ran out is gone,
 * fence.ts). A cancelled invocation answers `cancelled: true` to its holder, so the worker learns
 * to stop; anyone else's heartbeat is refused.
 */
export function heartbeatPlan(
  now: number,
  ns: string,
  id: string,
  queue: string | null,
  h: Holder,
  leaseMs: number | null,
  defaultLeaseMs: number,
): Plan<HeartbeatAnswer> {
  return {
    stmts: [
      stmt(
        `UPDATE invocations SET lease_until = ${leaseExpr('?6', '?7', '?1', 'invocations.queue', '?8')}, updated_at = ?6
          WHERE ${heldOne()} RETURNING lease_until`,
        ...holderArgs(now, ns, id, queue, h),
        leaseMs,
        defaultLeaseMs,
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
