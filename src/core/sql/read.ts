/** Plain reads: one row, one count. Both answer from the invocation rows themselves. */
import type { Plan } from '../plan.ts';
import { stmt } from '../port.ts';
import { toInvocation } from '../rows.ts';
import type { State } from '../states.ts';
import type { Invocation } from '../types.ts';

export const getPlan = (ns: string, id: string): Plan<Invocation | null> => ({
  stmts: [stmt(`SELECT * FROM invocations WHERE ns = ?1 AND id = ?2`, ns, id)],
  done: ([r]) => (r!.rows[0] ? toInvocation(r!.rows[0]) : null),
});

/** Just the queue of an invocation: how the HTTP layer routes by id to the queue's object. */
export const queueOfPlan = (ns: string, id: string): Plan<string | null> => ({
  stmts: [stmt(`SELECT queue FROM invocations WHERE ns = ?1 AND id = ?2`, ns, id)],
  done: ([r]) => (r!.rows[0] ? String(r!.rows[0].queue) : null),
});

export const countPlan = (ns: string, queue: string, state: State): Plan<number> => ({
  stmts: [stmt(`SELECT count(*) AS n FROM invocations WHERE ns = ?1 AND queue = ?2 AND state = ?3`, ns, queue, state)],
  done: ([r]) => Number(r!.rows[0]?.n ?? 0),
});

/** Queue settings: lease and attempts. Upsert; null leaves the plane default in force. */
export const configurePlan = (now: number, ns: string, queue: string, leaseMs: number | null, maxAttempts: number | null): Plan<void> => ({
  stmts: [
    stmt(
      `INSERT INTO queues (ns, queue, lease_ms, max_attempts, updated_at) VALUES (?1, ?2, ?3, ?4, ?5)
       ON CONFLICT (ns, queue) DO UPDATE SET lease_ms = excluded.lease_ms, max_attempts = excluded.max_attempts, updated_at = excluded.updated_at`,
      ns, queue, leaseMs, maxAttempts, now,
    ),
  ],
  done: () => undefined,
});

/** Queue names of a namespace: from the level counts (every submit makes one) and the settings. */
export const queuesPlan = (ns: string): Plan<string[]> => ({
  stmts: [stmt(`SELECT DISTINCT queue FROM queue_levels WHERE ns = ?1 UNION SELECT queue FROM queues WHERE ns = ?1 ORDER BY 1`, ns)],
  done: ([r]) => r!.rows.map((x) => String(x.queue)),
});
