import { stmt, type Stmt } from '../port.ts';
import { backoff, budget, exhausted, spent } from './attempts.ts';

/** A row a sweep moved, and where to: waiting again (queued, or delayed by a backoff; due and promoted), or failed for good. */
export interface Moved {
  id: string;
  state: 'queued' | 'delayed' | 'failed';
  /** Why: its lease ran out, its delay did, or its TTL did. */
  cause?: 'lease' | 'due' | 'ttl';
}

/**
 * expire: running rows of a queue whose lease passed go back to queued (delayed while a backoff
 * runs), or to failed once they used their attempts (attempts.ts). One guarded UPDATE (state =
 * 'running' AND lease_until <= now, through the index of running rows by deadline); it runs from
 * the alarm and also in front of every claim, so expiry never depends on an alarm firing.
 */
export function expireStmt(now: number, ns: string, queue: string, defaultMaxAttempts: number): Stmt {
  const lost = `json_object('type', 'LeaseExpired', 'message', 'the worker stopped answering: its lease expired')`;
  return stmt(
    `WITH x AS MATERIALIZED (
       SELECT r.rid, r.attempt, ${spent('r')} AS n, ${budget('r', '?4')} AS max, ${backoff('r')} AS delay
         FROM invocations r WHERE r.ns = ?1 AND r.queue = ?2 AND r.state = 'running' AND r.lease_until <= ?3)
     UPDATE invocations
        SET state = CASE WHEN x.n >= x.max THEN 'failed' WHEN x.delay > 0 THEN 'delayed' ELSE 'queued' END,
            run_at = CASE WHEN x.n < x.max AND x.delay > 0 THEN ?3 + x.delay END,
            error = CASE WHEN x.n >= x.max THEN ${exhausted(lost, 'x.n', 'x.max', 'x.attempt')} ELSE error END,
            finished_at = CASE WHEN x.n >= x.max THEN ?3 END,
            lease_until = NULL, updated_at = ?3
       FROM x WHERE invocations.rid = x.rid AND invocations.state = 'running'
      RETURNING invocations.id, invocations.state`,
    ns,
    queue,
    now,
    defaultMaxAttempts,
  );
}
