import type { Plan } from '../plan.ts';
import { stmt, type Stmt } from '../port.ts';
import { asBytes } from '../rows.ts';
import type { Claimed, ClaimKind } from '../types.ts';

export interface ClaimInput {
  workerId: string;
  kind: ClaimKind;
  /** Lease for this claim; null uses the queue's setting, then the plane default. */
  leaseMs: number | null;
}

const RETURNING = `RETURNING id, queue, envelope, attempt, lease_until, priority`;

/** The lease expression shared by claim and heartbeat: explicit, else per queue, else default. */
export const leaseExpr = (nowP: string, leaseP: string, nsP: string, qP: string, dfltP: string) =>
  `${nowP} + COALESCE(${leaseP}, (SELECT lease_ms FROM queues WHERE ns = ${nsP} AND queue = ${qP}), ${dfltP})`;

/**
 * claim: move one queued row to running for this worker, in one guarded UPDATE. The subquery
 * picks the row through the partial index of queued rows, so it reads a few index entries at
 * any depth; `AND state = 'queued'` guards the row itself. `level` pins the priority (boltzmann).
 */
export function claimStmt(now: number, ns: string, queue: string, c: ClaimInput, defaultLeaseMs: number, level: number | null): Stmt {
  let pick: string;
  if (level !== null) {
    pick = `SELECT rid FROM invocations WHERE ns = ?1 AND queue = ?2 AND state = 'queued' AND priority = ?7 ORDER BY rid ASC LIMIT 1`;
  } else if (c.kind === 'filo') {
    // Highest priority, newest first: pin the top level, then walk it backwards.
    pick = `SELECT rid FROM invocations WHERE ns = ?1 AND queue = ?2 AND state = 'queued'
              AND priority = (SELECT max(priority) FROM invocations WHERE ns = ?1 AND queue = ?2 AND state = 'queued')
            ORDER BY rid DESC LIMIT 1`;
  } else {
    pick = `SELECT rid FROM invocations WHERE ns = ?1 AND queue = ?2 AND state = 'queued' ORDER BY priority DESC, rid ASC LIMIT 1`;
  }
  return stmt(
    `UPDATE invocations
        SET state = 'running', attempt = attempt + 1, worker_id = ?3, started_at = ?4, updated_at = ?4,
            lease_until = ${leaseExpr('?4', '?5', '?1', '?2', '?6')}
      WHERE rid = (${pick}) AND state = 'queued'
      ${RETURNING}`,
    ...([ns, queue, c.workerId, now, c.leaseMs, defaultLeaseMs] as const),
    ...(level === null ? [] : [level]),
  );
}

export function toClaimed(r: Record<string, unknown>): Claimed {
  return {
    id: String(r.id),
    queue: String(r.queue),
    envelope: asBytes(r.envelope) ?? new Uint8Array(),
    attempt: Number(r.attempt),
    leaseUntil: Number(r.lease_until),
    priority: Number(r.priority),
  };
}

/** The queued count at each priority level (O(levels) rows), for boltzmann sampling. */
export const levelsStmt = (ns: string, queue: string): Stmt =>
  stmt(`SELECT priority, queued FROM queue_levels WHERE ns = ?1 AND queue = ?2 AND queued > 0`, ns, queue);

export type { Plan };
