import { stmt, type Stmt } from '../port.ts';
import { exhausted } from './attempts.ts';

/** A row an expiry moved, and where to: back to queued, or failed for good. */
export interface Expired {
  id: string;
  state: 'queued' | 'failed';
}

/**
 * expire: running rows of a queue whose lease passed go back to queued, or to failed once they
 * used their attempts (attempts.ts). One guarded UPDATE (state = 'running' AND lease_until <= now); it runs
 * from the alarm and also in front of every claim, so expiry never depends on an alarm firing.
 */
export function expireStmt(now: number, ns: string, queue: string, defaultMaxAttempts: number): Stmt {
  const lost = `json_object('type', 'LeaseExpired', 'message', 'the worker stopped answering: its lease expired')`;
  return stmt(
    `UPDATE invocations
        SET state = CASE WHEN attempt >= m.max THEN 'failed' ELSE 'queued' END,
            error = CASE WHEN attempt >= m.max THEN ${exhausted(lost, 'attempt', 'm.max')} ELSE error END,
            finished_at = CASE WHEN attempt >= m.max THEN ?3 ELSE NULL END,
            lease_until = NULL, updated_at = ?3
       FROM (SELECT COALESCE((SELECT max_attempts FROM queues WHERE ns = ?1 AND queue = ?2), ?4) AS max) AS m
      WHERE ns = ?1 AND queue = ?2 AND state = 'running' AND lease_until <= ?3
      RETURNING id, state`,
    ns, queue, now, defaultMaxAttempts,
  );
}

/** The earliest lease deadline among the queue's running rows, for the alarm. */
export const nextLeaseStmt = (ns: string, queue: string): Stmt =>
  stmt(`SELECT min(lease_until) AS next FROM invocations WHERE ns = ?1 AND queue = ?2 AND state = 'running'`, ns, queue);
