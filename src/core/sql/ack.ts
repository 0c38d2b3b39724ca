/**
 * ack: running -> succeeded, by the worker holding the attempt. One guarded UPDATE per group of
 * items (see groups.ts); each row is fenced by its own item's worker and attempt, so a stale item
 * fails alone and the others land.
 */
import { toHex } from '../bytes.ts';
import { fillMissed, type Plan } from '../plan.ts';
import { stmt, type Stmt } from '../port.ts';
import { diagnose, held, heldOne, holderArgs, sameHolder, staleError, type Holder } from './fence.ts';
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

const RETURNING = `RETURNING invocations.id, invocations.queue, invocations.attempt`;

const ackOne = (now: number, ns: string, a: AckItem): Stmt =>
  stmt(
    `UPDATE invocations SET state = 'succeeded', result = ?7, lease_until = NULL, updated_at = ?6, finished_at = ?6
      WHERE ${heldOne()} ${RETURNING}`,
    ...holderArgs(now, ns, a.id, a.queue, a.holder),
    a.result,
  );

/**
 * m: each item with its row, found through the (ns, id) index one item at a time (materialized,
 * so the planner cannot turn it into a scan of the running rows); the guard (fence.ts) compares
 * each row with its own item's id, queue, worker and attempt. The guard offers the planner no
 * index (`indexed: false`), so each row is reached by the rid m found: offered one, the planner
 * read the namespace's running rows through invocations_running (ns = ?) for every set.
 */
const itemHeld = held(
  'invocations.',
  { ns: '?1', id: 'm.v->>0', queue: 'm.v->>1', worker: 'm.v->>2', workerNo: 'm.v->>5', attempt: 'm.v->>3', now: '?3' },
  { indexed: false },
);
const ackSet = (now: number, ns: string, items: AckItem[]): Stmt =>
  stmt(
    `WITH m AS MATERIALIZED (
       SELECT i.rid AS rid, j.value AS v FROM json_each(?2) AS j CROSS JOIN invocations AS i
        WHERE i.ns = ?1 AND i.id = j.value->>0)
     UPDATE invocations
        SET state = 'succeeded', result = unhex(m.v->>4), lease_until = NULL, updated_at = ?3, finished_at = ?3
       FROM m
      WHERE invocations.rid = m.rid AND ${itemHeld}
      ${RETURNING}`,
    ns,
    JSON.stringify(
      items.map((a) => [
        a.id,
        a.queue,
        a.holder.workerId,
        a.holder.attempt,
        a.result === null ? null : toHex(a.result),
        a.holder.workerNo ?? null,
      ]),
    ),
    now,
  );

export function ackPlan(now: number, ns: string, items: AckItem[]): Plan<(Finished | Error)[]> {
  // Two items of one id (a retried ack beside the current one) go in statements one after the
  // other: a set statement that matched both would write either item's result.
  const groups = groupBySize(
    items,
    (a) => a.result?.length ?? 0,
    (a) => a.id,
  );
  return {
    stmts: groups.map((g) => (g.alone || g.items.length === 1 ? ackOne(now, ns, g.items[0]!) : ackSet(now, ns, g.items))),
    done: (rs) => {
      const out = scatter<AckItem, Finished>(groups, items.length, rs, (g, rows) => {
        // A group names each id once (groupBySize's key), so a row that came back succeeded
        // answers its one item; items of a later group found it finished and are diagnosed alone
        // (absorbed, or refused 409).
        const done = new Map(rows.map((r) => [String(r.id), String(r.queue)]));
        return g.items.map((a) => {
          const queue = done.get(a.id);
          return queue === undefined ? null : { queue, state: 'succeeded', absorbed: false };
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
