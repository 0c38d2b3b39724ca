/**
 * Fencing: ack, nack, heartbeat, append and release act only while the caller holds the running
 * attempt. The rule is written once, here (`held`), and every one of those statements puts it in
 * its WHERE, for one item or for a set; when it misses, `diagnose` reads the row once to say why
 * (unknown id: 404; someone else's, finished or timed-out attempt: 409) or to absorb a retried
 * request whose first try already landed.
 */
import { fenced, invocationNotFound } from '../errors.ts';
import type { Plan } from '../plan.ts';
import { stmt, type Stmt, type StmtResult } from '../port.ts';
import type { State } from '../states.ts';
import { WORKER_ID, workerNumber } from './workers.ts';

export interface Holder {
  workerId: string;
  /** The attempt the worker claimed; null when the caller's contract carries only the worker id. */
  attempt: number | null;
  /** The worker's number (sql/workers.ts), where the engine knows it; else the guard looks the name up. */
  workerNo?: number | null;
}

/** The SQL expressions (parameters, or a set's JSON fields) the guard compares a row with. */
export interface HolderSql {
  ns: string;
  id: string;
  /** The queue, or an expression that is NULL when the caller did not name one. */
  queue: string;
  worker: string;
  /** The worker's number, or an expression that is NULL where it is not known: then the name is looked up. */
  workerNo?: string;
  /** The attempt, or an expression that is NULL when the caller's contract carries only the worker id. */
  attempt: string;
  now: string;
}

/**
 * The fencing guard, as a WHERE fragment over table alias `t`: the row is `id` of `ns` (in
 * `queue`, when named), it is running, `worker` holds it on `attempt` (when named), and its lease
 * has not run out at `now`. A lease that ran out is gone whether or not a sweep has moved the row
 * yet: the sweep's condition (expire.ts, `lease_until <= now`) is this one's complement.
 *
 * `indexed: false` writes each column `+t.col`, so the guard offers the planner no index: for a
 * statement that reaches its rows another way (a set's ack, by the rowid its items' lookup found),
 * where the guard's `ns` and `state` would offer invocations_running and with it a read of every
 * running row of the namespace (test/model/planner.test.ts).
 */
export const held = (t: string, a: HolderSql, { indexed = true } = {}): string => {
  const c = indexed ? t : `+${t}`;
  // The holder's number: given, or looked up by its name (NULL for a name never registered, which
  // holds nothing); a row claimed before migration 0018 has no number, and its holder's name.
  const number = a.workerNo ? `COALESCE(${a.workerNo}, ${workerNumber(a.ns, a.worker)})` : workerNumber(a.ns, a.worker);
  const worker = `(${c}worker = ${number} OR (${c}worker IS NULL AND ${c}worker_id = ${a.worker}))`;
  return (
    `${c}ns = ${a.ns} AND ${c}id = ${a.id} AND (${a.queue} IS NULL OR ${c}queue = ${a.queue}) AND ${c}state = 'running'` +
    ` AND ${worker} AND (${a.attempt} IS NULL OR ${c}attempt = ${a.attempt}) AND ${c}lease_until > ${a.now}`
  );
};

export const heldOne = (t = '') => held(t, { ns: '?1', id: '?2', queue: '?3', worker: '?4', attempt: '?5', now: '?6' });
export const holderArgs = (now: number, ns: string, id: string, queue: string | null, h: Holder) =>
  [ns, id, queue, h.workerId, h.attempt, now] as const;

export interface RowFacts {
  rid: number;
  queue: string;
  state: State;
  workerId: string | null;
  attempt: number;
  leaseUntil: number | null;
}

/**
 * Reads the row's fencing facts (and, with `extra`, one more statement's rows in the same
 * round trip); `decide` turns them into an answer or throws. An unknown id is a 404.
 */
export function diagnose<T>(
  ns: string,
  id: string,
  queue: string | null,
  decide: (row: RowFacts, extra: StmtResult | undefined) => T,
  extra?: Stmt,
): Plan<T> {
  const stmts = [
    stmt(
      `SELECT rid, queue, state, ${WORKER_ID}, attempt, lease_until FROM invocations WHERE ns = ?1 AND id = ?2 AND (?3 IS NULL OR queue = ?3)`,
      ns,
      id,
      queue,
    ),
  ];
  if (extra) stmts.push(extra);
  return {
    stmts,
    done: ([r, x]) => {
      const row = r!.rows[0];
      if (!row) throw invocationNotFound(id);
      const leaseUntil = row.lease_until === null || row.lease_until === undefined ? null : Number(row.lease_until);
      return decide(
        {
          rid: Number(row.rid),
          queue: String(row.queue),
          state: row.state as State,
          workerId: (row.worker_id as string | null) ?? null,
          attempt: Number(row.attempt),
          leaseUntil,
        },
        x,
      );
    },
  };
}

/** True when the row's last attempt is the caller's. */
export const sameHolder = (row: Pick<RowFacts, 'workerId' | 'attempt'>, h: Holder) =>
  row.workerId === h.workerId && (h.attempt === null || row.attempt === h.attempt);

/** True when the caller holds the row's running attempt at `now`: `held`, read back from a row. */
export const holds = (row: RowFacts, h: Holder, now: number) =>
  row.state === 'running' && sameHolder(row, h) && row.leaseUntil !== null && row.leaseUntil > now;

export function staleError(verb: string, id: string, row: RowFacts, h: Holder): Error {
  const at = `invocation ${JSON.stringify(id)}`;
  if (row.state !== 'running') return fenced(`${verb} refused: ${at} is ${row.state}, not running`);
  if (!sameHolder(row, h)) {
    return fenced(
      `${verb} refused: ${at} is held by attempt ${row.attempt}${row.workerId === h.workerId ? '' : ' of another worker'}; this worker's lease was lost`,
    );
  }
  if (row.leaseUntil !== null) {
    return fenced(
      `${verb} refused: the lease of attempt ${row.attempt} of ${at} ran out at ${new Date(row.leaseUntil).toISOString()}; this worker's lease was lost`,
    );
  }
  return fenced(`${verb} refused for ${at}`);
}
