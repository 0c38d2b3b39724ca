/**
 * submit: insert queued rows. Idempotent: a conflict on the key (per ns and queue) or on the id
 * (per ns) inserts nothing, and a follow-up answers the existing invocation.
 */
import { LakeshoreError } from '../errors.ts';
import { asText, toHex } from '../bytes.ts';
import { fillMissed, type Plan } from '../plan.ts';
import { stmt, type Stmt } from '../port.ts';
import { groupBySize, scatter } from './groups.ts';

export interface SubmitInput {
  id: string;
  envelope: Uint8Array;
  key: string | null;
  priority: number;
  parent: string | null;
  /** When it may first be claimed, if later than now: the row starts delayed. */
  runAt: number | null;
  /** When it fails as Expired if still waiting; null: the queue's default TTL, else never. */
  expiresAt: number | null;
  maxAttempts: number | null;
}

export interface Submitted {
  id: string;
  /** False when an invocation with the same key (or the same id in the same queue) already existed. */
  created: boolean;
}

/** What a created row needs of the engine: claims to wake (queued), or a timer (its run_at, its TTL). */
export interface Created extends Submitted {
  queued: boolean;
  runAt: number | null;
  expiresAt: number | null;
}

/**
 * SQL: the columns every submit inserts, from its values: a row due later starts delayed; a
 * submit without a TTL takes its queue's default, if any (?ttl: the queue's ttl_ms, read once).
 */
const VALUES = (runAt: string, expiresAt: string, now: string) =>
  `CASE WHEN ${runAt} IS NOT NULL THEN 'delayed' ELSE 'queued' END, 0, ${now}, ${now}, ${runAt},
   COALESCE(${expiresAt}, ${now} + (SELECT ttl_ms FROM queues WHERE ns = ?1 AND queue = ?2))`;

const COLUMNS = `(ns, queue, id, key, priority, parent, envelope, state, attempt, created_at, updated_at, run_at, expires_at, max_attempts)`;

/**
 * The envelope is stored as TEXT where it is UTF-8 (a JSON envelope always is), else as a BLOB
 * (the column has no affinity, so each keeps its type). Over D1's JSON, text crosses as itself
 * where a blob must go as hex (twice its bytes) or an array of numbers; claims read it back by
 * its type (sql/claim.ts), every other reader takes either (rows.ts).
 */
const insertOne = (now: number, ns: string, queue: string, s: SubmitInput): Stmt =>
  stmt(
    `INSERT INTO invocations ${COLUMNS}
     VALUES (?1, ?2, ?3, ?4, ?5, ?6, COALESCE(?7, X''), ${VALUES('?9', '?10', '?8')}, ?11)
     ON CONFLICT DO NOTHING RETURNING id, state, run_at, expires_at`,
    ns,
    queue,
    s.id,
    s.key,
    s.priority,
    s.parent,
    asText(s.envelope) ?? s.envelope,
    now,
    s.runAt,
    s.expiresAt,
    s.maxAttempts,
  );

/**
 * Many rows in one INSERT over a JSON array (one bound parameter, so no per-statement parameter
 * limit). json_each yields the items in array order, so two with the same key resolve to the first.
 */
const insertSet = (now: number, ns: string, queue: string, items: SubmitInput[]): Stmt =>
  stmt(
    `INSERT INTO invocations ${COLUMNS}
     SELECT ?1, ?2, value->>0, value->>1, value->>2, value->>3, COALESCE(value->>8, unhex(value->>4), X''), ${VALUES('value->>5', 'value->>6', '?4')}, value->>7
       FROM json_each(?3) WHERE true
     ON CONFLICT DO NOTHING RETURNING id, state, run_at, expires_at`,
    ns,
    queue,
    JSON.stringify(
      items.map((s) => {
        const text = asText(s.envelope);
        return [s.id, s.key, s.priority, s.parent, text === null ? toHex(s.envelope) : null, s.runAt, s.expiresAt, s.maxAttempts, text];
      }),
    ),
    now,
  );

/**
 * Submits in as few statements as their bytes allow (see groups.ts). The rows that come back were
 * created; each other item conflicted on its key or id and is answered by its own follow-up,
 * exactly as a lone submit would be. A created id answers its first item; a repeat of it in the
 * same batch is diagnosed like any other conflict.
 */
export function submitPlan(now: number, ns: string, queue: string, items: SubmitInput[]): Plan<(Created | Submitted | Error)[]> {
  const groups = groupBySize(items, (s) => s.envelope.length);
  return {
    stmts: groups.map((g) =>
      g.alone || g.items.length === 1 ? insertOne(now, ns, queue, g.items[0]!) : insertSet(now, ns, queue, g.items),
    ),
    done: (rs) => {
      const out = scatter<SubmitInput, Created | Submitted>(groups, items.length, rs, (g, rows) => {
        const created = new Map(rows.map((r) => [String(r.id), r]));
        return g.items.map((s) => {
          const r = created.get(s.id);
          if (!r) return null;
          created.delete(s.id);
          const at = (v: unknown) => (v === null || v === undefined ? null : Number(v));
          return { id: s.id, created: true, queued: r.state === 'queued', runAt: at(r.run_at), expiresAt: at(r.expires_at) };
        });
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
      throw new LakeshoreError('conflict', `submit of ${JSON.stringify(s.id)} conflicted with a concurrent change; retry it`, {
        retryable: true,
      });
    },
  };
}
