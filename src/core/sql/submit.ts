/**
 * submit: insert queued rows. Idempotent: a conflict on the key (per ns and queue) or on the id
 * (per ns) inserts nothing, and a follow-up answers the existing invocation.
 */
import { LakeshoreError } from '../errors.ts';
import { toHex } from '../bytes.ts';
import { fillMissed, type Plan } from '../plan.ts';
import { stmt, type Stmt } from '../port.ts';
import { groupBySize, scatter } from './groups.ts';

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

const insertOne = (now: number, ns: string, queue: string, s: SubmitInput): Stmt =>
  stmt(
    `INSERT INTO invocations (ns, queue, id, key, priority, parent, envelope, state, attempt, created_at, updated_at)
     VALUES (?1, ?2, ?3, ?4, ?5, ?6, COALESCE(?7, X''), 'queued', 0, ?8, ?8)
     ON CONFLICT DO NOTHING RETURNING id`,
    ns, queue, s.id, s.key, s.priority, s.parent, s.envelope, now,
  );

/**
 * Many rows in one INSERT over a JSON array (one bound parameter, so no per-statement parameter
 * limit). json_each yields the items in array order, so two with the same key resolve to the first.
 */
const insertSet = (now: number, ns: string, queue: string, items: SubmitInput[]): Stmt =>
  stmt(
    `INSERT INTO invocations (ns, queue, id, key, priority, parent, envelope, state, attempt, created_at, updated_at)
     SELECT ?1, ?2, value->>0, value->>1, value->>2, value->>3, COALESCE(unhex(value->>4), X''), 'queued', 0, ?4, ?4
       FROM json_each(?3) WHERE true
     ON CONFLICT DO NOTHING RETURNING id`,
    ns, queue, JSON.stringify(items.map((s) => [s.id, s.key, s.priority, s.parent, toHex(s.envelope)])), now,
  );

/**
 * Submits in as few statements as their bytes allow (see groups.ts). The rows that come back were
 * created; each other item conflicted on its key or id and is answered by its own follow-up,
 * exactly as a lone submit would be. A created id answers its first item; a repeat of it in the
 * same batch is diagnosed like any other conflict.
 */
export function submitPlan(now: number, ns: string, queue: string, items: SubmitInput[]): Plan<(Submitted | Error)[]> {
  const groups = groupBySize(items, (s) => s.envelope.length);
  return {
    stmts: groups.map((g) => (g.alone || g.items.length === 1 ? insertOne(now, ns, queue, g.items[0]!) : insertSet(now, ns, queue, g.items))),
    done: (rs) => {
      const out = scatter<SubmitInput, Submitted>(groups, items.length, rs, (g, rows) => {
        const created = new Set(rows.map((r) => String(r.id)));
        return g.items.map((s) => (created.delete(s.id) ? { id: s.id, created: true } : null));
      });
      return fillMissed(out, (i) => existingPlan(ns, queue, items[i]!));
    },
  };
}

/** Why a submit inserted nothing: its key or id already names an invocation. */
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
