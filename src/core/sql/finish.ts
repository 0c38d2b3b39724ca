/** ack and nack: the worker ends its attempt. Both are one guarded UPDATE fenced by the holder. */
import { followUp, type Plan } from '../plan.ts';
import { stmt } from '../port.ts';
import type { InvocationError } from '../types.ts';
import { diagnose, HELD, sameHolder, staleError, type Holder } from './fence.ts';

export interface Finished {
  queue: string;
  /** The state the row is in now. */
  state: 'succeeded' | 'failed' | 'queued';
  /** True when this request repeated one that had already landed. */
  absorbed: boolean;
}

export function ackPlan(now: number, ns: string, id: string, queue: string | null, h: Holder, result: Uint8Array | null): Plan<Finished> {
  return {
    stmts: [
      stmt(
        `UPDATE invocations SET state = 'succeeded', result = ?6, lease_until = NULL, updated_at = ?7, finished_at = ?7
          WHERE ${HELD} RETURNING queue`,
        ns, id, queue, h.workerId, h.attempt, result, now,
      ),
    ],
    done: ([u]) => {
      const row = u!.rows[0];
      if (row) return { queue: String(row.queue), state: 'succeeded', absorbed: false };
      return followUp(
        diagnose(ns, id, queue, (r) => {
          if (r.state === 'succeeded' && sameHolder(r, h)) return { queue: r.queue, state: 'succeeded', absorbed: true };
          throw staleError('ack', id, r, h);
        }),
      );
    },
  };
}

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
