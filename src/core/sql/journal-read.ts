/** read: a page of an invocation's journal after a cursor, with the row's state and outcome. */
import { invocationNotFound } from '../errors.ts';
import type { Plan } from '../plan.ts';
import { stmt } from '../port.ts';
import { outcomeOf, toJournalFrame } from '../rows.ts';
import { isTerminal, type State } from '../states.ts';
import type { JournalFrame, JournalPage } from '../types.ts';

/**
 * Most frame bytes (bodies and meta) one page holds, past its first frame: a page crosses RPC from
 * the queue object (32 MiB at most), sits in an isolate's memory (128 MB) and goes to an SSE
 * reader whole, so `limit` frames of up to 256 KiB each (hundreds of MB) must not be one page.
 */
export const PAGE_BYTES = 1 << 20;

/** Pages that stopped before the journal's end (at `limit` frames, or at PAGE_BYTES). */
const cutShort = new WeakSet<JournalPage>();

/** Whether a page holds every frame after its cursor (a tail may be learned from it; a reader may go live). */
export const reachedEnd = (page: JournalPage): boolean => !cutShort.has(page);

/** Says of `page` that frames after it were left out (by `limit` or PAGE_BYTES). */
export function leftOut(page: JournalPage): JournalPage {
  cutShort.add(page);
  return page;
}

/** The first frames after the cursor a page reads whole, whatever their size (with PAGE_BYTES: 4 of 256 KiB). */
const HEAD = 4;
/**
 * Past them, a frame is read whole only if it is at most this many bytes: `limit` of them stay
 * within 8 MiB (1 KiB each at the most frames a page may ask, 8 KiB at the default 1,000).
 */
const inlineBytes = (limitP: string) => `max(1024, ${8 << 20} / ${limitP})`;

/**
 * A page of frames after `since`: at most `limit` frames and about PAGE_BYTES of them (at least
 * one, whatever its size). One statement, reading no more rows than a page of `limit` frames: a
 * frame past the first HEAD and larger than inlineBytes comes back without its body (length()
 * and the CASE read none of it), and the page ends before it; the next page starts with it. A seq
 * gap wider than HEAD is the first frame's own case (min(seq), read only when a frame is large).
 * With `queue` (a caller's hint), only if the invocation is in that queue.
 */
export function readPlan(ns: string, id: string, since: number, limit: number, queue: string | null = null): Plan<JournalPage> {
  const inv = '(SELECT rid FROM invocations WHERE ns = ?1 AND id = ?2)';
  return {
    stmts: [
      stmt(
        `SELECT rid, state, result, error, trimmed FROM invocations WHERE ns = ?1 AND id = ?2 AND (?3 IS NULL OR queue = ?3)`,
        ns,
        id,
        queue,
      ),
      stmt(
        `SELECT seq, kind, attempt, final, meta,
                CASE WHEN length(body) <= ${inlineBytes('?4')} OR seq <= ?3 + ${HEAD}
                       OR seq = (SELECT min(seq) FROM frames WHERE inv = ${inv} AND seq > ?3)
                     THEN body END AS body
           FROM frames WHERE inv = ${inv} AND seq > ?3 ORDER BY seq LIMIT ?4`,
        ns,
        id,
        since,
        limit,
      ),
    ],
    done: ([inv, fr]) => {
      const row = inv!.rows[0];
      if (!row) throw invocationNotFound(id);
      // The frames up to the first read without its body, or to PAGE_BYTES: the rest are the next page's.
      const frames: JournalFrame[] = [];
      let bytes = 0;
      for (const r of fr!.rows) {
        if (r.body === null || r.body === undefined || bytes >= PAGE_BYTES) break;
        const f = toJournalFrame(r);
        frames.push(f);
        bytes += f.body.length + (typeof r.meta === 'string' ? r.meta.length : 0);
      }
      const state = row.state as State;
      const last = frames[frames.length - 1];
      const atEnd = frames.length === fr!.rows.length && frames.length < limit;
      const terminal = isTerminal(state);
      const done = (last?.final ?? false) || (terminal && atEnd);
      const page: JournalPage = {
        frames,
        next: last ? last.seq : since,
        trimmedBefore: Number(row.trimmed),
        done,
        state,
        outcome: done && terminal ? outcomeOf(row as { state: unknown }) : null,
      };
      return atEnd ? page : leftOut(page);
    },
  };
}
