/** configure: a queue's own settings (upsert); a null leaves the plane default in force. */
import type { Plan } from '../plan.ts';
import { stmt } from '../port.ts';

export const configurePlan = (now: number, ns: string, queue: string, { leaseMs, maxAttempts }: { leaseMs: number | null; maxAttempts: number | null }): Plan<void> => ({
  stmts: [
    stmt(
      `INSERT INTO queues (ns, queue, lease_ms, max_attempts, updated_at) VALUES (?1, ?2, ?3, ?4, ?5)
       ON CONFLICT (ns, queue) DO UPDATE SET lease_ms = excluded.lease_ms, max_attempts = excluded.max_attempts, updated_at = excluded.updated_at`,
      ns, queue, leaseMs, maxAttempts, now,
    ),
  ],
  done: () => undefined,
});
