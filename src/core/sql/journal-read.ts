/** read: a page of an invocation's journal after a cursor, with the row's state and outcome. */
import { invocationNotFound } from '../errors.ts';
import type { Plan } from '../plan.ts';
import { stmt } from '../port.ts';
import { outcomeOf, toJournalFrame } from '../rows.ts';
import { isTerminal, type State } from '../states.ts';
import type { JournalPage } from '../types.ts';

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

/**
 * A page of frames after `since`: at most `limit` frames and about PAGE_BYTES (at least one
 * frame, whatever its size). The window counts the frame bytes from each row's header (length()
 * reads no blob), then only the frames within the budget are read whole. With `queue` (a
 * caller's hint), only if the invocation is in that queue.
 */
export function readPlan(ns: string, id: string, since: number, limit: number, queue: string | null = null): Plan<JournalPage> {
  return {
    stmts: [
      stmt(
        `SELECT rid, state, result, error, trimmed FROM invocations WHERE ns = ?1 AND id = ?2 AND (?3 IS NULL OR queue = ?3)`,
        ns,
        id,
        queue,
      ),
      stmt(
        `WITH c AS (
           SELECT seq, length(body) + ifnull(length(meta), 0) AS n FROM frames
            WHERE inv = (SELECT rid FROM invocations WHERE ns = ?1 AND id = ?2) AND seq > ?3
            ORDER BY seq LIMIT ?4),
         w AS (SELECT seq, sum(n) OVER (ORDER BY seq ROWS UNBOUNDED PRECEDING) - n AS before, count(*) OVER () AS seen FROM c)
         SELECT f.seq, f.kind, f.body, f.meta, f.attempt, f.final, w.seen FROM w
           JOIN frames AS f ON f.inv = (SELECT rid FROM invocations WHERE ns = ?1 AND id = ?2) AND f.seq = w.seq
          WHERE w.before < ${PAGE_BYTES} ORDER BY f.seq`,
        ns,
        id,
        since,
        limit,
      ),
    ],
    done: ([inv, fr]) => {
      const row = inv!.rows[0];
      if (!row) throw invocationNotFound(id);
      const frames = fr!.rows.map(toJournalFrame);
      // The frames after `since` the page looked at (at most `limit`): all of them read, and fewer than `limit`, is the end.
      const seen = fr!.rows.length ? Number(fr!.rows[0]!.seen) : 0;
      const state = row.state as State;
      const last = frames[frames.length - 1];
      const atEnd = seen < limit && frames.length === seen;
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
