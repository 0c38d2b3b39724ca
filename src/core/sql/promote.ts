import { stmt, type Stmt } from '../port.ts';

/** Most rows one promote or TTL sweep moves; the rest go with the next one. */
export const SWEEP_ROWS = 1000;

/**
 * promote: delayed rows of a queue whose time came (`run_at <= now`) move to queued. The subquery
 * reads them through the index of delayed rows by due time, so a claim reads the same few rows
 * whether one job or a hundred thousand wait their time. It runs in front of every claim and from
 * the alarm.
 */
export const promoteStmt = (now: number, ns: string, queue: string): Stmt =>
  stmt(
    `UPDATE invocations SET state = 'queued', run_at = NULL, updated_at = ?3
      WHERE rid IN (SELECT rid FROM invocations WHERE ns = ?1 AND queue = ?2 AND state = 'delayed' AND run_at <= ?3 ORDER BY run_at LIMIT ${SWEEP_ROWS})
        AND state = 'delayed'
      RETURNING id`,
    ns,
    queue,
    now,
  );

/**
 * ttl: waiting rows (delayed or queued) whose TTL ran out fail as Expired, never handed out. Read
 * through the index of rows that have a TTL, so rows without one cost nothing here.
 */
export const ttlStmt = (now: number, ns: string, queue: string): Stmt =>
  stmt(
    `UPDATE invocations
        SET state = 'failed', run_at = NULL, finished_at = ?3, updated_at = ?3,
            error = json_object('type', 'Expired', 'message',
                                'not claimed before its TTL ran out at ' || strftime('%Y-%m-%dT%H:%M:%fZ', expires_at / 1000.0, 'unixepoch'))
      WHERE rid IN (SELECT rid FROM invocations WHERE ns = ?1 AND queue = ?2 AND expires_at IS NOT NULL AND state IN ('delayed', 'queued')
                       AND expires_at <= ?3 ORDER BY expires_at LIMIT ${SWEEP_ROWS})
        AND state IN ('delayed', 'queued')
      RETURNING id`,
    ns,
    queue,
    now,
  );
