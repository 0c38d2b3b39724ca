import { LakeshoreError } from '../errors.ts';
import { followUp, type Plan } from '../plan.ts';
import { stmt } from '../port.ts';

export interface SubmitInput {
  id: string;
  envelope: Uint8Array;
  key: string | null;
  priority: number;
  parent: string | null;
}

export interface Submitted {
  id: string;
  /** False when an invocation with the same key (or the same id in the same queue) already existed. */
  created: boolean;
}

/**
 * submit: insert a queued row. It is idempotent: a conflict on the key (per ns and queue) or on
 * the id (per ns) inserts nothing, and the follow-up answers the existing invocation.
 */
export function submitPlan(now: number, ns: string, queue: string, s: SubmitInput): Plan<Submitted> {
  return {
    stmts: [
      stmt(
        `INSERT INTO invocations (ns, queue, id, key, priority, parent, envelope, state, attempt, created_at, updated_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, COALESCE(?7, X''), 'queued', 0, ?8, ?8)
         ON CONFLICT DO NOTHING RETURNING id`,
        ns, queue, s.id, s.key, s.priority, s.parent, s.envelope, now,
      ),
    ],
    done: ([ins]) => (ins!.rows.length ? { id: s.id, created: true } : followUp(existingPlan(ns, queue, s))),
  };
}

function existingPlan(ns: string, queue: string, s: SubmitInput): Plan<Submitted> {
  return {
    stmts: [
      stmt(`SELECT id FROM invocations WHERE ns = ?1 AND queue = ?2 AND key = ?3`, ns, queue, s.key),
      stmt(`SELECT id, queue FROM invocations WHERE ns = ?1 AND id = ?2`, ns, s.id),
    ],
    done: ([byKey, byId]) => {
      const k = byKey!.rows[0];
      if (k) return { id: String(k.id), created: false };
      const r = byId!.rows[0];
      if (r && r.queue === queue) return { id: s.id, created: false };
      if (r) throw new LakeshoreError('conflict', `id ${JSON.stringify(s.id)} already names an invocation in another queue`);
      throw new LakeshoreError('conflict', `submit of ${JSON.stringify(s.id)} conflicted with a concurrent change; retry it`, { retryable: true });
    },
  };
}
