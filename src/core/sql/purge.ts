/**
 * purge: retention. Finished jobs (succeeded, failed, cancelled) whose `finished_at` is older than
 * their queue's `retention_ms` (else the plane's default) are deleted with their frames, in bounded
 * batches, oldest submitted first, each state's finished-jobs index walked from its start.
 *
 * One batch looks at the first `batch` finished rows of each state only: its cost is bounded
 * whatever the history. A row that finished late (say, retried long after its submit) sits among
 * the oldest by submit order until its own retention passes, and may hold back a batch of younger
 * ones behind it until then.
 *
 * The same pass removes the frames of finished jobs whose queue keeps frames for less than its jobs
 * (`journal_retention_ms`): up to `batch` jobs noted in `journals_due` (schema.ts), the longest
 * finished first. The job's row stays, with `trimmed` raised to its last seq removed, as a trim
 * leaves it: a journal read answers no frames, and the state and result as before.
 */
import type { Plan } from '../plan.ts';
import { stmt, type Stmt } from '../port.ts';
import { FINISHED } from './finished.ts';

export interface Purged {
  /** Jobs deleted (their frames with them). */
  jobs: number;
  frames: number;
  /** Ids of the finished jobs whose frames alone were removed (journal_retention_ms). */
  trimmed: string[];
  /** The queue's journal_retention_ms: a job that finishes from now may have frames due that soon. */
  journalRetentionMs: number | null;
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

/** How long the queue keeps its finished jobs' frames; null: as long as the jobs (nothing is due). */
const JOURNAL_RETENTION = `(SELECT journal_retention_ms FROM queues WHERE ns = ?1 AND queue = ?2)`;

/** Up to ?3 finished jobs whose frames are due at ?4, the longest finished first. */
const JOURNALS_DUE = `SELECT inv FROM journals_due WHERE ns = ?1 AND queue = ?2 AND finished_at <= ?4 - ${JOURNAL_RETENTION}
  ORDER BY finished_at, inv LIMIT ?3`;

export function purgePlan(now: number, ns: string, queue: string, defaultRetentionMs: number, batch: number): Plan<Purged> {
  const stmts: Stmt[] = [];
  for (const s of STATES) {
    const due = `SELECT rid FROM (${windowOf(s)}) WHERE finished_at < ?5 - ${RETENTION}`;
    stmts.push(
      stmt(`DELETE FROM frames WHERE inv IN (${due})`, ns, queue, defaultRetentionMs, batch, now),
      stmt(`DELETE FROM invocations WHERE rid IN (${due}) RETURNING rid`, ns, queue, defaultRetentionMs, batch, now),
    );
  }
  // Frames due alone (the row stays): the row notes the last seq removed, then the frames go, then the notes.
  stmts.push(
    stmt(
      `UPDATE invocations SET trimmed = max(trimmed, COALESCE((SELECT max(seq) FROM frames WHERE inv = invocations.rid), -1))
        WHERE rid IN (${JOURNALS_DUE}) RETURNING id`,
      ns,
      queue,
      batch,
      now,
    ),
    stmt(`DELETE FROM frames WHERE inv IN (${JOURNALS_DUE})`, ns, queue, batch, now),
    stmt(`DELETE FROM journals_due WHERE inv IN (${JOURNALS_DUE})`, ns, queue, batch, now),
    stmt(
      `SELECT min(finished_at) + ${JOURNAL_RETENTION} AS due, ${JOURNAL_RETENTION} AS journal_retention FROM journals_due WHERE ns = ?1 AND queue = ?2`,
      ns,
      queue,
    ),
  );
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
      const at = STATES.length * 2;
      const trimmed = rs[at]!.rows.map((r) => String(r.id));
      frames += rs[at + 1]!.changes;
      if (trimmed.length >= batch) more = true;
      const journalDue = rs[at + 3]!.rows[0]?.due;
      const jr = rs[at + 3]!.rows[0]?.journal_retention;
      const journalRetentionMs = jr === null || jr === undefined ? null : Number(jr);
      const left = rs[at + 4]!.rows[0];
      const oldest = left?.oldest;
      const rowsDue = oldest === null || oldest === undefined ? null : Number(oldest) + Number(left!.retention);
      const framesDue = journalDue === null || journalDue === undefined ? null : Number(journalDue);
      const nextAt = rowsDue === null ? framesDue : framesDue === null ? rowsDue : Math.min(rowsDue, framesDue);
      return { jobs, frames, trimmed, more, nextAt, journalRetentionMs };
    },
  };
}
