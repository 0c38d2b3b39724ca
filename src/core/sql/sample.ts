/**
 * Boltzmann sampling's counts: how many rows wait at each priority level of a queue, kept by
 * triggers (migrations 0001 and 0004) only on queues that a sampling claim has marked.
 */
import { stmt, type Stmt } from '../port.ts';

/** The queued count at each priority level (O(levels) rows), for boltzmann sampling. */
export const levelsStmt = (ns: string, queue: string): Stmt =>
  stmt(`SELECT priority, queued FROM queue_levels WHERE ns = ?1 AND queue = ?2 AND queued > 0`, ns, queue);

/**
 * Level counts are kept only for queues that were sampled before (migration 0004). The first
 * sampling claim of a queue sets each level's count from the rows themselves (O(depth) through
 * the queued index, once in the queue's life) and marks the queue, in its own transaction; from
 * then on the triggers keep the counts. On a marked queue the recount's guard is false and both
 * statements only read a few rows; an engine that has seen the mark leaves them out.
 */
export const markSampledStmts = (now: number, ns: string, queue: string): Stmt[] => [
  stmt(
    `UPDATE queue_levels
        SET queued = (SELECT count(*) FROM invocations AS i
                       WHERE i.ns = ?1 AND i.queue = ?2 AND i.state = 'queued' AND i.priority = queue_levels.priority)
      WHERE ns = ?1 AND queue = ?2 AND NOT EXISTS (SELECT 1 FROM queues WHERE ns = ?1 AND queue = ?2 AND sampled = 1)`,
    ns,
    queue,
  ),
  stmt(
    `INSERT INTO queues (ns, queue, updated_at, sampled) VALUES (?1, ?2, ?3, 1)
     ON CONFLICT (ns, queue) DO UPDATE SET sampled = 1 WHERE sampled = 0`,
    ns,
    queue,
    now,
  ),
];
