/**
 * The journal: frames appended by the holding worker, read by anyone in the namespace, trimmed
 * by producers. Frames are derived data: the terminal result lives on the invocation row, and a
 * read past a trim falls back to that row.
 */
import { LakeshoreError, notFound } from '../errors.ts';
import { followUp, type Plan } from '../plan.ts';
import { stmt } from '../port.ts';
import { outcomeOf, toJournalFrame } from '../rows.ts';
import { isTerminal, type State } from '../states.ts';
import type { JournalPage } from '../types.ts';
import { HELD, staleError, type Holder } from './fence.ts';

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
      return followUp(appendMissPlan(ns, id, queue, h, a, maxFrames));
    },
  };
}

export function appendMissPlan(ns: string, id: string, queue: string | null, h: Holder, a: AppendInput, maxFrames: number): Plan<Appended> {
  return {
    stmts: [
      stmt(`SELECT rid, queue, state, worker_id, attempt FROM invocations WHERE ns = ?1 AND id = ?2 AND (?3 IS NULL OR queue = ?3)`, ns, id, queue),
      stmt(
        `SELECT f.attempt, f.final, (SELECT COALESCE(max(seq), -1) + 1 FROM frames WHERE inv = i.rid) AS next
           FROM invocations i LEFT JOIN frames f ON f.inv = i.rid AND f.seq = ?3
          WHERE i.ns = ?1 AND i.id = ?2`,
        ns, id, a.seq,
      ),
    ],
    done: ([r, f]) => {
      const row = r!.rows[0];
      if (!row) throw notFound(`invocation ${JSON.stringify(id)}`);
      const facts = { rid: Number(row.rid), queue: String(row.queue), state: row.state as State, workerId: (row.worker_id as string | null) ?? null, attempt: Number(row.attempt) };
      const fr = f!.rows[0];
      const mine = facts.workerId === h.workerId && (h.attempt === null || facts.attempt === h.attempt);
      if (a.seq !== null && fr && fr.attempt !== null && mine && Number(fr.attempt) === facts.attempt) {
        return { seq: a.seq, queue: facts.queue, final: Number(fr.final) === 1, absorbed: true };
      }
      const seq = a.seq ?? Number(fr?.next ?? 0);
      if (facts.state === 'running' && mine && seq >= maxFrames) {
        throw new LakeshoreError('payload_too_large', `the journal of ${JSON.stringify(id)} is full: at most ${maxFrames} frames`);
      }
      if (facts.state === 'running' && mine && fr && fr.attempt !== null) {
        throw new LakeshoreError('conflict', `seq ${seq} of ${JSON.stringify(id)} was already written by attempt ${String(fr.attempt)}`);
      }
      throw staleError('append', id, facts, h);
    },
  };
}

export function readPlan(ns: string, id: string, since: number, limit: number): Plan<JournalPage> {
  return {
    stmts: [
      stmt(`SELECT rid, state, result, error, trimmed FROM invocations WHERE ns = ?1 AND id = ?2`, ns, id),
      stmt(
        `SELECT seq, kind, body, meta, attempt, final FROM frames
          WHERE inv = (SELECT rid FROM invocations WHERE ns = ?1 AND id = ?2) AND seq > ?3
          ORDER BY seq LIMIT ?4`,
        ns, id, since, limit,
      ),
    ],
    done: ([inv, fr]) => {
      const row = inv!.rows[0];
      if (!row) throw notFound(`invocation ${JSON.stringify(id)}`);
      const frames = fr!.rows.map(toJournalFrame);
      const state = row.state as State;
      const last = frames[frames.length - 1];
      const exhausted = frames.length < limit;
      const terminal = isTerminal(state);
      const done = (last?.final ?? false) || (terminal && exhausted);
      return {
        frames,
        next: last ? last.seq : since,
        trimmedBefore: Number(row.trimmed) >= 0 ? Number(row.trimmed) + 1 : -1,
        done,
        state,
        outcome: done && terminal ? outcomeOf(row as { state: unknown }) : null,
      };
    },
  };
}

export interface Trimmed {
  trimmed: number;
  queue: string;
}

/** trim: drop all but the last `keepLast` frames; the row remembers the highest seq dropped. */
export function trimPlan(ns: string, id: string, queue: string | null, keepLast: number): Plan<Trimmed> {
  return {
    stmts: [
      stmt(
        `UPDATE invocations
            SET trimmed = max(trimmed, COALESCE((SELECT seq FROM frames WHERE inv = invocations.rid ORDER BY seq DESC LIMIT 1 OFFSET ?4), -1))
          WHERE ns = ?1 AND id = ?2 AND (?3 IS NULL OR queue = ?3)
          RETURNING queue`,
        ns, id, queue, keepLast,
      ),
      stmt(
        `DELETE FROM frames WHERE inv = (SELECT rid FROM invocations WHERE ns = ?1 AND id = ?2)
            AND seq <= (SELECT trimmed FROM invocations WHERE ns = ?1 AND id = ?2)`,
        ns, id,
      ),
    ],
    done: ([u, d]) => {
      const row = u!.rows[0];
      if (!row) throw notFound(`invocation ${JSON.stringify(id)}`);
      return { trimmed: d!.changes, queue: String(row.queue) };
    },
  };
}
