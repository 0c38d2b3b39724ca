/** claim: queued -> running for one worker, up to a limit of rows, in one guarded UPDATE. */
import { stmt, type Stmt } from '../port.ts';
import { fromHex } from '../bytes.ts';
import type { Claimed, ClaimKind } from '../types.ts';

export interface ClaimInput {
  workerId: string;
  kind: ClaimKind;
  /** Lease for this claim; null uses the queue's setting, then the plane default. */
  leaseMs: number | null;
}

/**
 * The envelope comes back as hex: D1 carries a blob over JSON as an array of numbers, which
 * costs several times the bytes and most of a claim's parse time; hex is two characters a byte.
 */
const RETURNING = `RETURNING rid, id, queue, hex(envelope) AS envelope_hex, attempt, lease_until, priority`;

/** The lease expression shared by claim and heartbeat: explicit, else per queue, else default. */
export const leaseExpr = (nowP: string, leaseP: string, nsP: string, qP: string, dfltP: string) =>
  `${nowP} + COALESCE(${leaseP}, (SELECT lease_ms FROM queues WHERE ns = ${nsP} AND queue = ${qP}), ${dfltP})`;

/**
 * claim: move up to `limit` queued rows to running for this worker, in one guarded UPDATE. The
 * subquery picks them through the partial index of queued rows, so it reads a few index entries
 * per row at any depth; `AND state = 'queued'` guards each row itself. `level` pins the priority
 * (boltzmann). filo takes from the top level only, newest first (one index range, no sort).
 * RETURNING order is unspecified: `claimOrder` puts the rows in claim order. (A single claim
 * uses `rid = (...)`, which D1 counts as three fewer rows read than `IN`.)
 */
export function claimStmt(now: number, ns: string, queue: string, c: ClaimInput, defaultLeaseMs: number, level: number | null, limit = 1): Stmt {
  let pick: string;
  if (level !== null) {
    pick = `SELECT rid FROM invocations WHERE ns = ?1 AND queue = ?2 AND state = 'queued' AND priority = ?7 ORDER BY rid ASC LIMIT ?8`;
  } else if (c.kind === 'filo') {
    pick = `SELECT rid FROM invocations WHERE ns = ?1 AND queue = ?2 AND state = 'queued'
              AND priority = (SELECT max(priority) FROM invocations WHERE ns = ?1 AND queue = ?2 AND state = 'queued')
            ORDER BY rid DESC LIMIT ?8`;
  } else {
    pick = `SELECT rid FROM invocations WHERE ns = ?1 AND queue = ?2 AND state = 'queued' ORDER BY priority DESC, rid ASC LIMIT ?8`;
  }
  return stmt(
    `UPDATE invocations
        SET state = 'running', attempt = attempt + 1, worker_id = ?3, started_at = ?4, updated_at = ?4,
            lease_until = ${leaseExpr('?4', '?5', '?1', '?2', '?6')}
      WHERE rid ${limit === 1 ? '=' : 'IN'} (${pick}) AND state = 'queued'
      ${RETURNING}`,
    ns, queue, c.workerId, now, c.leaseMs, defaultLeaseMs, level, limit,
  );
}

/** Claimed rows in the order the claim kind promises (fifo: priority then age; filo: newest first). */
export function claimOrder(rows: Record<string, unknown>[], kind: ClaimKind): Record<string, unknown>[] {
  const rid = (r: Record<string, unknown>) => Number(r.rid);
  if (kind === 'filo') return rows.sort((a, b) => rid(b) - rid(a));
  return rows.sort((a, b) => Number(b.priority) - Number(a.priority) || rid(a) - rid(b));
}

export function toClaimed(r: Record<string, unknown>): Claimed {
  return {
    id: String(r.id),
    queue: String(r.queue),
    envelope: fromHex(String(r.envelope_hex ?? '')),
    attempt: Number(r.attempt),
    leaseUntil: Number(r.lease_until),
    priority: Number(r.priority),
  };
}
