/**
 * purge: retention. Finished jobs (succeeded, failed, cancelled) whose `finished_at` is older than
 * their queue's `retention_ms` (else the plane's default) are deleted with their frames, in bounded
 * batches, oldest submitted first, each state's finished-jobs index walked from its start.
 *
 * One batch looks at the first `batch` finished rows of each state only: its cost is bounded
 * whatever the history. A row that finished late (say, retried long after its submit) sits among
 * the oldest by submit order until its own retention passes, and may hold back a batch of younger
 * ones behind it until then.
 */
import type { Plan } from '../plan.ts';
import { stmt, type Stmt } from '../port.ts';
import { FINISHED } from './finished.ts';

export interface Purged {
  /** Jobs deleted (their frames with them). */
  jobs: number;
  frames: number;
  /** True when a state's window was all past retention: run again, there may be more. */
  more: boolean;
  /** When the oldest finished job left comes due, epoch ms; null: none is left. */
  nextAt: number | null;
}

const STATES = ['succeeded', 'failed', 'cancelled'] as const;

/** The first `batch` finished rows of one state, by submit order: the window one batch looks at. */
const windowOf = (state: string) =>
  `SELECT rid, finished_at FROM invocations INDEXED BY invocations_finished
    WHERE ns = ?1 AND queue = ?2 AND ${FINISHED} AND state = '${state}' ORDER BY rid LIMIT ?4`;

/** The queue's retention, or the plane's default (?3), in ms. */
const RETENTION = `COALESCE((SELECT retention_ms FROM queues WHERE ns = ?1 AND queue = ?2), ?3)`;

export function purgePlan(now: number, ns: string, queue: string, defaultRetentionMs: number, batch: number): Plan<Purged> {
  const stmts: Stmt[] = [];
  for (const s of STATES) {
    const due = `SELECT rid FROM (${windowOf(s)}) WHERE finished_at < ?5 - ${RETENTION}`;
    stmts.push(
      stmt(`DELETE FROM frames WHERE inv IN (${due})`, ns, queue, defaultRetentionMs, batch, now),
      stmt(`DELETE FROM invocations WHERE rid IN (${due}) RETURNING rid`, ns, queue, defaultRetentionMs, batch, now),
    );
  }
  // What is left: the earliest finish among each state's window, and the retention it waits.
  stmts.push(
    stmt(
      `SELECT min(finished_at) AS oldest, ${RETENTION} AS retention FROM (${STATES.map((s) => `SELECT * FROM (${windowOf(s)})`).join(' UNION ALL ')})`,
      ns,
      queue,
      defaultRetentionMs,
      batch,
    ),
  );
  return {
    stmts,
    done: (rs) => {
      let jobs = 0;
      let frames = 0;
      let more = false;
      for (let i = 0; i < STATES.length; i++) {
        frames += rs[i * 2]!.changes;
        const n = rs[i * 2 + 1]!.rows.length;
        jobs += n;
        if (n >= batch) more = true;
      }
      const left = rs[STATES.length * 2]!.rows[0];
      const oldest = left?.oldest;
      return { jobs, frames, more, nextAt: oldest === null || oldest === undefined ? null : Number(oldest) + Number(left!.retention) };
    },
  };
}
