/**
 * release: running -> queued for claims whose answer never reached their worker (its connection
 * was gone when the claim took them). The attempt is not charged: `budget_from` moves up with it,
 * so the job's budget is what it was before the claim; the attempt number itself stays, so fencing
 * stays monotonic (a claim of the same job later has a higher attempt). Guarded like an ack: only
 * rows still running under that worker and attempt move. The row keeps its place (rid): it is the
 * next claim's first pick.
 */
import type { Plan } from '../plan.ts';
import { stmt } from '../port.ts';
import { held } from './fence.ts';

export interface Handed {
  id: string;
  /** Null: whichever attempt the worker holds (a caller that knows only its worker id). */
  attempt: number | null;
}

/**
 * Each item ([id, attempt] of ?4) fenced by the one guard, with the claiming worker (?3) and queue
 * (?2). The items lead (CROSS JOIN) and each row is found by its (ns, id), not by reading the
 * namespace's running rows.
 */
const itemHeld = held('r.', { ns: '?1', id: 'j.value->>0', queue: '?2', worker: '?3', attempt: 'j.value->>1', now: '?5' });

export const releasePlan = (now: number, ns: string, queue: string, workerId: string, items: Handed[]): Plan<string[]> => ({
  stmts: [
    stmt(
      `UPDATE invocations SET state = 'queued', budget_from = budget_from + 1, lease_until = NULL, updated_at = ?5
        WHERE rid IN (SELECT r.rid FROM json_each(?4) j CROSS JOIN invocations r ON ${itemHeld})
        RETURNING id`,
      ns,
      queue,
      workerId,
      JSON.stringify(items.map((h) => [h.id, h.attempt])),
      now,
    ),
  ],
  done: ([u]) => u!.rows.map((r) => String(r.id)),
});
