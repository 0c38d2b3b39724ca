/** trim: drop all but the last `keepLast` frames; the row remembers the highest seq dropped. */
import { invocationNotFound } from '../errors.ts';
import type { Plan } from '../plan.ts';
import { stmt } from '../port.ts';

export interface Trimmed {
  trimmed: number;
  queue: string;
}

export function trimPlan(ns: string, id: string, queue: string | null, keepLast: number): Plan<Trimmed> {
  return {
    stmts: [
      stmt(
        `UPDATE invocations
            SET trimmed = max(trimmed, COALESCE((SELECT seq FROM frames WHERE inv = invocations.rid ORDER BY seq DESC LIMIT 1 OFFSET ?4), -1))
          WHERE ns = ?1 AND id = ?2 AND (?3 IS NULL OR queue = ?3)
          RETURNING queue`,
        ns,
        id,
        queue,
        keepLast,
      ),
      stmt(
        `DELETE FROM frames WHERE inv = (SELECT rid FROM invocations WHERE ns = ?1 AND id = ?2)
            AND seq <= (SELECT trimmed FROM invocations WHERE ns = ?1 AND id = ?2)`,
        ns,
        id,
      ),
    ],
    done: ([u, d]) => {
      const row = u!.rows[0];
      if (!row) throw invocationNotFound(id);
      return { trimmed: d!.changes, queue: String(row.queue) };
    },
  };
}
