/**
 * append: the holding worker adds a frame to the journal. With a seq it is idempotent on
 * (invocation, seq); without one it takes the next seq.
 */
import { LakeshoreError } from '../errors.ts';
import { followUp, type Plan } from '../plan.ts';
import { stmt } from '../port.ts';
import { diagnose, heldOne, holderArgs, holds, sameHolder, staleError, type Holder } from './fence.ts';
import type { FrameKind, JournalFrame } from '../frame.ts';

export interface AppendInput {
  /** Position; null assigns the next one. Passing it makes a retried append idempotent. */
  seq: number | null;
  kind: number;
  body: Uint8Array;
  meta: Record<string, unknown> | null;
  final: boolean;
}

export interface Appended {
  seq: number;
  queue: string;
  final: boolean;
  /** True when a frame with this seq from this attempt was already there (a retry). */
  absorbed: boolean;
  /** The frame as a read would give it back, when this append wrote it (tails.ts keeps it). */
  frame?: JournalFrame;
}

/** The journal's last frame (its seq, attempt and whether it ended the stream), through the primary key: O(1). */
const LAST = `(SELECT inv, seq, attempt, final FROM frames WHERE inv = (SELECT rid FROM invocations WHERE ns = ?1 AND id = ?2) ORDER BY seq DESC LIMIT 1)`;
/** The highest seq the journal ever held: its last frame's, or the highest one trimmed away. */
const TOP = `max(COALESCE(l.seq, -1), i.trimmed)`;

/**
 * A new frame goes after every seq the journal ever held (so no reader's cursor is already past
 * it), and never after a final frame of the same attempt (a reader that stopped at the end would
 * miss it). A retry of a frame that landed is absorbed (see appendMissed).
 */
export function appendPlan(
  now: number,
  ns: string,
  id: string,
  queue: string | null,
  h: Holder,
  a: AppendInput,
  maxFrames: number,
): Plan<Appended> {
  const seq = `COALESCE(?7, ${TOP} + 1)`;
  return {
    stmts: [
      stmt(
        `INSERT INTO frames (inv, seq, kind, body, meta, attempt, final, created_at)
         SELECT i.rid, ${seq}, ?8, COALESCE(?9, X''), ?10, i.attempt, ?11, ?6
           FROM invocations i LEFT JOIN ${LAST} AS l ON l.inv = i.rid
          WHERE ${heldOne('i.')} AND ${seq} > ${TOP} AND ${seq} < ?12 AND NOT (COALESCE(l.final, 0) = 1 AND l.attempt = i.attempt)
         ON CONFLICT (inv, seq) DO NOTHING
         RETURNING seq, attempt, (SELECT queue FROM invocations WHERE rid = inv) AS queue`,
        ...holderArgs(now, ns, id, queue, h),
        a.seq,
        a.kind,
        a.body,
        a.meta === null ? null : JSON.stringify(a.meta),
        a.final ? 1 : 0,
        maxFrames,
      ),
    ],
    done: ([ins]) => {
      const row = ins!.rows[0];
      if (row) {
        const seq = Number(row.seq);
        // meta as a read parses it back from its stored JSON.
        const frame: JournalFrame = {
          seq,
          kind: a.kind as FrameKind,
          body: a.body,
          meta: a.meta === null ? null : JSON.parse(JSON.stringify(a.meta)),
          attempt: Number(row.attempt),
          final: a.final,
        };
        return { seq, queue: String(row.queue), final: a.final, absorbed: false, frame };
      }
      return followUp(appendMissed(now, ns, id, queue, h, a, maxFrames));
    },
  };
}

/** Why an append inserted nothing: a retry (absorbed), a full journal, a seq not after the last, an ended stream, or a stale holder. */
const appendMissed = (
  now: number,
  ns: string,
  id: string,
  queue: string | null,
  h: Holder,
  a: AppendInput,
  maxFrames: number,
): Plan<Appended> =>
  diagnose(
    ns,
    id,
    queue,
    (row, x) => {
      const f = x!.rows[0]!;
      const mine = holds(row, h, now);
      const taken = f.attempt !== null && f.attempt !== undefined;
      // A retry of a frame that landed is absorbed, even after the attempt ended.
      if (a.seq !== null && taken && sameHolder(row, h) && Number(f.attempt) === row.attempt) {
        return { seq: a.seq, queue: row.queue, final: Number(f.final) === 1, absorbed: true };
      }
      if (!mine) throw staleError('append', id, row, h);
      const top = Math.max(f.last_seq === null ? -1 : Number(f.last_seq), Number(f.trimmed));
      const seq = a.seq ?? top + 1;
      const at = `invocation ${JSON.stringify(id)}`;
      if (seq >= maxFrames) throw new LakeshoreError('payload_too_large', `the journal of ${at} is full: at most ${maxFrames} frames`);
      if (taken) throw new LakeshoreError('conflict', `seq ${seq} of ${at} was already written by attempt ${String(f.attempt)}`);
      if (Number(f.last_final) === 1 && Number(f.last_attempt) === row.attempt) {
        throw new LakeshoreError(
          'conflict',
          `attempt ${row.attempt} of ${at} already ended its stream (a final frame at seq ${String(f.last_seq)}): nothing may follow it`,
        );
      }
      if (seq <= top)
        throw new LakeshoreError(
          'conflict',
          `seq ${seq} of ${at} is not after the journal's last seq ${top}: a reader may already be past it`,
        );
      throw staleError('append', id, row, h);
    },
    stmt(
      `SELECT f.attempt, f.final, l.seq AS last_seq, l.attempt AS last_attempt, l.final AS last_final, i.trimmed
         FROM invocations i LEFT JOIN frames f ON f.inv = i.rid AND f.seq = ?3 LEFT JOIN ${LAST} AS l ON l.inv = i.rid
        WHERE i.ns = ?1 AND i.id = ?2`,
      ns,
      id,
      a.seq,
    ),
  );
