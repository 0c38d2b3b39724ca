/**
 * Fencing: ack, nack, heartbeat and append act only while the caller holds the running attempt.
 * The guard sits in each statement's WHERE; when it misses, `diagnose` reads the row once to say
 * why (unknown id: 404; someone else's or finished attempt: 409) or to absorb a retried request
 * whose first try already landed.
 */
import { fenced, invocationNotFound } from '../errors.ts';
import type { Plan } from '../plan.ts';
import { stmt, type Stmt, type StmtResult } from '../port.ts';
import type { State } from '../states.ts';

export interface Holder {
  workerId: string;
  /** The attempt the worker claimed; null when the caller's contract carries only the worker id. */
  attempt: number | null;
}

/** WHERE fragment, the fencing guard: ?1 ns, ?2 id, ?3 queue-or-null, ?4 worker id, ?5 attempt-or-null (`t`: a table alias). */
export const held = (t = '') =>
  `${t}ns = ?1 AND ${t}id = ?2 AND (?3 IS NULL OR ${t}queue = ?3) AND ${t}state = 'running' AND ${t}worker_id = ?4 AND (?5 IS NULL OR ${t}attempt = ?5)`;
export const HELD = held();

export interface RowFacts {
  rid: number;
  queue: string;
  state: State;
  workerId: string | null;
  attempt: number;
}

/**
 * Reads the row's fencing facts (and, with `extra`, one more statement's rows in the same
 * round trip); `decide` turns them into an answer or throws. An unknown id is a 404.
 */
export function diagnose<T>(ns: string, id: string, queue: string | null, decide: (row: RowFacts, extra: StmtResult | undefined) => T, extra?: Stmt): Plan<T> {
  const stmts = [stmt(`SELECT rid, queue, state, worker_id, attempt FROM invocations WHERE ns = ?1 AND id = ?2 AND (?3 IS NULL OR queue = ?3)`, ns, id, queue)];
  if (extra) stmts.push(extra);
  return {
    stmts,
    done: ([r, x]) => {
      const row = r!.rows[0];
      if (!row) throw invocationNotFound(id);
      return decide({ rid: Number(row.rid), queue: String(row.queue), state: row.state as State, workerId: (row.worker_id as string | null) ?? null, attempt: Number(row.attempt) }, x);
    },
  };
}

/** True when the row's last attempt is the caller's. */
export const sameHolder = (row: Pick<RowFacts, 'workerId' | 'attempt'>, h: Holder) => row.workerId === h.workerId && (h.attempt === null || row.attempt === h.attempt);

/** True when the caller holds the row's running attempt. */
export const holds = (row: RowFacts, h: Holder) => row.state === 'running' && sameHolder(row, h);

export function staleError(verb: string, id: string, row: RowFacts, h: Holder): Error {
  if (row.state !== 'running') return fenced(`${verb} refused: invocation ${JSON.stringify(id)} is ${row.state}, not running`);
  if (!sameHolder(row, h)) {
    return fenced(`${verb} refused: invocation ${JSON.stringify(id)} is held by attempt ${row.attempt}${row.workerId === h.workerId ? '' : ' of another worker'}; this worker's lease was lost`);
  }
  return fenced(`${verb} refused for invocation ${JSON.stringify(id)}`);
}
