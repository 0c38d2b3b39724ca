/**
 * ack: running -> succeeded, by the worker holding the attempt. One guarded UPDATE per group of
 * items (see groups.ts); each row is fenced by its own item's worker and attempt, so a stale item
 * fails alone and the others land.
 */
import { toHex } from '../bytes.ts';
import { fillMissed, type Plan } from '../plan.ts';
import { stmt, type Stmt } from '../port.ts';
import { diagnose, HELD, sameHolder, staleError, type Holder } from './fence.ts';
import { groupBySize, scatter } from './groups.ts';

export interface AckItem {
  id: string;
  /** The invocation's queue when the caller knows it; it narrows the guard. */
  queue: string | null;
  holder: Holder;
  result: Uint8Array | null;
}

export interface Finished {
  queue: string;
  /** The state the row is in now. */
  state: 'succeeded' | 'failed' | 'queued' | 'delayed';
  /** True when this request repeated one that had already landed. */
  absorbed: boolean;
}

const RETURNING = `RETURNING invocations.id, invocations.queue, invocations.worker_id, invocations.attempt`;

const ackOne = (now: number, ns: string, a: AckItem): Stmt =>
  stmt(
    `UPDATE invocations SET state = 'succeeded', result = ?6, lease_until = NULL, updated_at = ?7, finished_at = ?7
      WHERE ${HELD} ${RETURNING}`,
    ns, a.id, a.queue, a.holder.workerId, a.holder.attempt, a.result, now,
  );

/**
 * m: each item with its row, found through the (ns, id) index one item at a time (materialized,
 * so the planner cannot turn it into a scan of the running rows); the guard compares each row
 * with its own item's worker, attempt and queue.
 */
const ackSet = (now: number, ns: string, items: AckItem[]): Stmt =>
  stmt(
    `WITH m AS MATERIALIZED (
       SELECT i.rid AS rid, j.value AS v FROM json_each(?2) AS j CROSS JOIN invocations AS i
        WHERE i.ns = ?1 AND i.id = j.value->>0)
     UPDATE invocations
        SET state = 'succeeded', result = unhex(m.v->>4), lease_until = NULL, updated_at = ?3, finished_at = ?3
       FROM m
      WHERE invocations.rid = m.rid AND invocations.state = 'running' AND invocations.worker_id = m.v->>2
        AND (m.v->>1 IS NULL OR invocations.queue = m.v->>1) AND (m.v->>3 IS NULL OR invocations.attempt = m.v->>3)
      ${RETURNING}`,
    ns, JSON.stringify(items.map((a) => [a.id, a.queue, a.holder.workerId, a.holder.attempt, a.result === null ? null : toHex(a.result)])), now,
  );

export function ackPlan(now: number, ns: string, items: AckItem[]): Plan<(Finished | Error)[]> {
  const groups = groupBySize(items, (a) => a.result?.length ?? 0);
  return {
    stmts: groups.map((g) => (g.alone || g.items.length === 1 ? ackOne(now, ns, g.items[0]!) : ackSet(now, ns, g.items))),
    done: (rs) => {
      const out = scatter<AckItem, Finished>(groups, items.length, rs, (g, rows) => {
        // A row that succeeded answers the first item whose holder it matches. Two items may name
        // the same id (a retried ack of an earlier attempt beside the current one): only the item
        // that held the row succeeded; the others are diagnosed alone (absorbed, or refused 409).
        const done = new Map(rows.map((r) => [String(r.id), { queue: String(r.queue), holder: { workerId: String(r.worker_id), attempt: Number(r.attempt) } }]));
        return g.items.map((a) => {
          const row = done.get(a.id);
          if (!row || !sameHolder(row.holder, a.holder)) return null;
          done.delete(a.id);
          return { queue: row.queue, state: 'succeeded', absorbed: false };
        });
      });
      return fillMissed(out, (i) => ackMissed(ns, items[i]!));
    },
  };
}

/** Why an ack's guard missed: a retry of an ack that landed is absorbed; anything else is stale. */
const ackMissed = (ns: string, a: AckItem): Plan<Finished> =>
  diagnose(ns, a.id, a.queue, (r) => {
    if (r.state === 'succeeded' && sameHolder(r, a.holder)) return { queue: r.queue, state: 'succeeded', absorbed: true };
    throw staleError('ack', a.id, r, a.holder);
  });
