/** read: a page of an invocation's journal after a cursor, with the row's state and outcome. */
import { invocationNotFound } from '../errors.ts';
import type { Plan } from '../plan.ts';
import { stmt } from '../port.ts';
import { outcomeOf, toJournalFrame } from '../rows.ts';
import { isTerminal, type State } from '../states.ts';
import type { JournalPage } from '../types.ts';

/** A page of frames after `since`; with `queue` (a caller's hint), only if the invocation is in that queue. */
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
        `SELECT seq, kind, body, meta, attempt, final FROM frames
          WHERE inv = (SELECT rid FROM invocations WHERE ns = ?1 AND id = ?2) AND seq > ?3
          ORDER BY seq LIMIT ?4`,
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
      const state = row.state as State;
      const last = frames[frames.length - 1];
      const exhausted = frames.length < limit;
      const terminal = isTerminal(state);
      const done = (last?.final ?? false) || (terminal && exhausted);
      return {
        frames,
        next: last ? last.seq : since,
        trimmedBefore: Number(row.trimmed),
        done,
        state,
        outcome: done && terminal ? outcomeOf(row as { state: unknown }) : null,
      };
    },
  };
}
