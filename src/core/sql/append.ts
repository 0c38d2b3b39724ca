/**
 * append: the holding worker adds a frame to the journal. With a seq it is idempotent on
 * (invocation, seq); without one it takes the next seq.
 */
import { LakeshoreError } from '../errors.ts';
import { followUp, type Plan } from '../plan.ts';
import { stmt } from '../port.ts';
import { diagnose, HELD, holds, sameHolder, staleError, type Holder } from './fence.ts';

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
}

export function appendPlan(now: number, ns: string, id: string, queue: string | null, h: Holder, a: AppendInput, maxFrames: number): Plan<Appended> {
  return {
    stmts: [
      stmt(
        `INSERT INTO frames (inv, seq, kind, body, meta, attempt, final, created_at)
         SELECT rid, s.seq, ?7, COALESCE(?8, X''), ?9, attempt, ?10, ?11
           FROM invocations,
                (SELECT COALESCE(?6, (SELECT COALESCE(max(f.seq), -1) + 1 FROM frames f
                                       WHERE f.inv = (SELECT rid FROM invocations WHERE ns = ?1 AND id = ?2))) AS seq) AS s
          WHERE ${HELD} AND s.seq < ?12
         ON CONFLICT (inv, seq) DO NOTHING
         RETURNING seq, (SELECT queue FROM invocations WHERE rid = inv) AS queue`,
        ns, id, queue, h.workerId, h.attempt, a.seq, a.kind, a.body, a.meta === null ? null : JSON.stringify(a.meta), a.final ? 1 : 0, now, maxFrames,
      ),
    ],
    done: ([ins]) => {
      const row = ins!.rows[0];
      if (row) return { seq: Number(row.seq), queue: String(row.queue), final: a.final, absorbed: false };
      return followUp(appendMissed(ns, id, queue, h, a, maxFrames));
    },
  };
}

/** Why an append inserted nothing: a retry (absorbed), a full journal, a taken seq, or a stale holder. */
const appendMissed = (ns: string, id: string, queue: string | null, h: Holder, a: AppendInput, maxFrames: number): Plan<Appended> =>
  diagnose(
    ns, id, queue,
    (row, x) => {
      const fr = x!.rows[0];
      const mine = holds(row, h);
      const taken = fr !== undefined && fr.attempt !== null;
      // A retry of a frame that landed is absorbed, even after the attempt ended.
      if (a.seq !== null && taken && sameHolder(row, h) && Number(fr.attempt) === row.attempt) {
        return { seq: a.seq, queue: row.queue, final: Number(fr.final) === 1, absorbed: true };
      }
      const seq = a.seq ?? Number(fr?.next ?? 0);
      if (mine && seq >= maxFrames) throw new LakeshoreError('payload_too_large', `the journal of ${JSON.stringify(id)} is full: at most ${maxFrames} frames`);
      if (mine && taken) throw new LakeshoreError('conflict', `seq ${seq} of ${JSON.stringify(id)} was already written by attempt ${String(fr.attempt)}`);
      throw staleError('append', id, row, h);
    },
    stmt(
      `SELECT f.attempt, f.final, (SELECT COALESCE(max(seq), -1) + 1 FROM frames WHERE inv = i.rid) AS next
         FROM invocations i LEFT JOIN frames f ON f.inv = i.rid AND f.seq = ?3
        WHERE i.ns = ?1 AND i.id = ?2`,
      ns, id, a.seq,
    ),
  );
