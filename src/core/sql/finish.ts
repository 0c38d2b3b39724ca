/** ack and nack: the worker ends its attempt. Both are one guarded UPDATE fenced by the holder. */
import { toHex } from '../bytes.ts';
import { fillMissed, followUp, type Plan } from '../plan.ts';
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
      return followUp(ackMissed(ns, id, queue, h));
    },
  };
}

/** Why an ack's guard missed: a retry of an ack that landed is absorbed; anything else is stale. */
const ackMissed = (ns: string, id: string, queue: string | null, h: Holder): Plan<Finished> =>
  diagnose(ns, id, queue, (r) => {
    if (r.state === 'succeeded' && sameHolder(r, h)) return { queue: r.queue, state: 'succeeded', absorbed: true };
    throw staleError('ack', id, r, h);
  });

export interface AckItem {
  id: string;
  queue: string | null;
  holder: Holder;
  result: Uint8Array | null;
}

/**
 * Many acks in one UPDATE over a JSON array. Each row is still fenced on its own (the guard
 * compares each row with its own item's worker and attempt); the rows that come back succeeded,
 * and each item whose guard missed is diagnosed alone, exactly as a single ack would be.
 */
export function ackManyPlan(now: number, ns: string, items: AckItem[]): Plan<(Finished | Error)[]> {
  const json = JSON.stringify(items.map((a) => [a.id, a.queue, a.holder.workerId, a.holder.attempt, a.result === null ? null : toHex(a.result)]));
  return {
    stmts: [
      stmt(
        // m: each item with its row, found through the (ns, id) index one item at a time
        // (materialized, so the planner cannot turn it into a scan of the running rows).
        `WITH m AS MATERIALIZED (
           SELECT i.rid AS rid, j.value AS v FROM json_each(?2) AS j CROSS JOIN invocations AS i
            WHERE i.ns = ?1 AND i.id = j.value->>0)
         UPDATE invocations
            SET state = 'succeeded', result = unhex(m.v->>4), lease_until = NULL, updated_at = ?3, finished_at = ?3
           FROM m
          WHERE invocations.rid = m.rid AND invocations.state = 'running' AND invocations.worker_id = m.v->>2
            AND (m.v->>1 IS NULL OR invocations.queue = m.v->>1) AND (m.v->>3 IS NULL OR invocations.attempt = m.v->>3)
          RETURNING invocations.id, invocations.queue, invocations.worker_id, invocations.attempt`,
        ns, json, now,
      ),
    ],
    done: ([u]) => {
      // A row that succeeded answers the first item whose holder it matches. Two items may name
      // the same id (a retried ack of an earlier attempt beside the current one): only the item
      // that held the row succeeded; the others are diagnosed alone (absorbed, or refused 409).
      const done = new Map(u!.rows.map((r) => [String(r.id), { queue: String(r.queue), holder: { workerId: String(r.worker_id), attempt: Number(r.attempt) } }]));
      const out: (Finished | Error | null)[] = items.map((a) => {
        const row = done.get(a.id);
        if (!row || !sameHolder(row.holder, a.holder)) return null;
        done.delete(a.id);
        return { queue: row.queue, state: 'succeeded', absorbed: false };
      });
      return fillMissed(out, (i) => ackMissed(ns, items[i]!.id, items[i]!.queue, items[i]!.holder));
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
