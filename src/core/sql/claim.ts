/** claim: queued -> running for one worker, up to a limit of rows, in one guarded UPDATE. */
import { stmt, type Stmt } from '../port.ts';
import { fromHex, utf8 } from '../bytes.ts';
import type { Claimed, ClaimKind } from '../types.ts';
import type { Hints } from '../hints.ts';
import { workerNumber } from './workers.ts';

export interface ClaimInput {
  workerId: string;
  kind: ClaimKind;
  /** Lease for this claim; null uses the queue's setting, then the plane default. */
  leaseMs: number | null;
}

/**
 * The envelope comes back as it is stored (sql/submit.ts): text as itself, a blob as hex (D1
 * carries a blob over JSON as an array of numbers, several times the bytes; hex is two
 * characters a byte).
 */
const RETURNING = `RETURNING rid, id, queue, CASE typeof(envelope) WHEN 'text' THEN envelope END AS envelope_text,
  CASE typeof(envelope) WHEN 'text' THEN NULL ELSE hex(envelope) END AS envelope_hex, attempt, lease_until, priority, worker,
  attempt - budget_from AS budget_attempt`;

/** The lease expression shared by claim and heartbeat: explicit, else per queue, else default. */
export const leaseExpr = (nowP: string, leaseP: string, nsP: string, qP: string, dfltP: string) =>
  `${nowP} + COALESCE(${leaseP}, (SELECT lease_ms FROM queues WHERE ns = ${nsP} AND queue = ${qP}), ${dfltP})`;

/**
 * Most envelope bytes one claim hands out (at least one row, whatever its size): what a claim
 * answers crosses RPC between the queue object and the Worker, capped at 32 MiB. The claim
 * statement does not count bytes (that would read every candidate row, not just the index):
 * `withinClaimBytes` splits what it took, and the rest is released (work.ts).
 */
export const CLAIM_BYTES = 16 << 20;

/** Claimed rows in claim order: those within CLAIM_BYTES (at least the first), and the rest. */
export function withinClaimBytes(rows: Claimed[]): [Claimed[], Claimed[]] {
  let bytes = 0;
  let n = 0;
  while (n < rows.length && (n === 0 || bytes + rows[n]!.envelope.length <= CLAIM_BYTES)) bytes += rows[n++]!.envelope.length;
  return [rows.slice(0, n), rows.slice(n)];
}

/**
 * SQL: how many rows a claim may take now, at most ?8 (its max): none while the queue is paused,
 * no more than its running cap leaves (counted in the same statement, so no two claims can pass
 * it together), no more than its claim rate's bucket holds. One read of the queue's settings row;
 * the running count only on a capped queue.
 */
const ALLOWED = `(SELECT CASE WHEN q.paused = 1 THEN 0 ELSE min(?8,
     CASE WHEN q.max_running IS NULL THEN ?8
          ELSE max(0, q.max_running - (SELECT count(*) FROM invocations r WHERE r.ns = ?1 AND r.queue = ?2 AND r.state = 'running')) END,
     CASE WHEN q.claims_per_second IS NULL THEN ?8 ELSE CAST(${tokens('q', '?4')} AS INTEGER) END) END
   FROM (SELECT 1) LEFT JOIN queues q ON q.ns = ?1 AND q.queue = ?2)`;

/** SQL: the claim rate's bucket of queue row `q` at `now`: its tokens refilled, up to a second's worth. */
function tokens(q: string, now: string): string {
  const burst = `max(1, ${q}.claims_per_second)`;
  return `min(${burst}, COALESCE(${q}.claim_tokens, ${burst}) + (${now} - COALESCE(${q}.claim_tokens_at, ${now})) * ${q}.claims_per_second / 1000.0)`;
}

/**
 * claim: move up to `limit` queued rows to running for this worker, in one guarded UPDATE. The
 * subquery picks them through the partial index of queued rows, so it reads a few index entries
 * per row at any depth; `AND state = 'queued'` guards each row itself. `level` pins the priority
 * (boltzmann). filo takes from the top level only, newest first (one index range, no sort). It
 * takes no more than ALLOWED
 * (pause, running cap, claim rate), and never a row whose TTL ran out. RETURNING order is
 * unspecified: `claimOrder` puts the rows in claim order. (A single claim uses `rid = (...)`,
 * which D1 counts as three fewer rows read than `IN`.) Spend its tokens right after (claimStmts).
 */
export function claimStmt(
  now: number,
  ns: string,
  queue: string,
  c: ClaimInput,
  defaultLeaseMs: number,
  level: number | null,
  limit = 1,
  plain = false,
): Stmt {
  // `plain`: the queue is known to be neither paused, capped nor rate-limited (hints.ts).
  const allowed = plain ? '?8' : ALLOWED;
  let where = `ns = ?1 AND queue = ?2 AND state = 'queued'`;
  let order = 'priority DESC, rid ASC';
  if (level !== null) {
    where += ' AND priority = ?7';
    order = 'rid ASC';
  } else if (c.kind === 'filo') {
    where += ` AND priority = (SELECT max(priority) FROM invocations WHERE ns = ?1 AND queue = ?2 AND state = 'queued')`;
    order = 'rid DESC';
  }
  const pick = `SELECT rid FROM invocations WHERE ${where} ORDER BY ${order} LIMIT ${allowed}`;
  return stmt(
    `UPDATE invocations
        SET state = 'running', attempt = attempt + 1, worker = ${workerNumber('?1', '?3')}, worker_id = NULL, started_at = ?4, updated_at = ?4,
            lease_until = ${leaseExpr('?4', '?5', '?1', '?2', '?6')}
      WHERE rid ${limit === 1 ? '=' : 'IN'} (${pick}) AND state = 'queued' AND (expires_at IS NULL OR expires_at > ?4)
      ${RETURNING}`,
    ns,
    queue,
    c.workerId,
    now,
    c.leaseMs,
    defaultLeaseMs,
    level,
    limit,
  );
}

/**
 * After a claim statement, in the same batch: takes what it claimed (`changes()`) out of the
 * queue's claim-rate bucket. A queue without a claim rate is not written.
 */
export const spendTokensStmt = (now: number, ns: string, queue: string): Stmt =>
  stmt(
    `UPDATE queues SET claim_tokens = ${tokens('queues', '?3')} - changes(), claim_tokens_at = ?3
      WHERE ns = ?1 AND queue = ?2 AND claims_per_second IS NOT NULL`,
    ns,
    queue,
    now,
  );

/**
 * A claim statement and, unless the queue is known to have no claim rate, the bucket spending
 * that must follow it directly. The claim's result is the first.
 */
export function claimStmts(
  now: number,
  ns: string,
  queue: string,
  c: ClaimInput,
  defaultLeaseMs: number,
  level: number | null,
  limit: number,
  known?: Hints,
): Stmt[] {
  const plain = !!known && !known.paused && !known.capped && !known.rated;
  const claim = claimStmt(now, ns, queue, c, defaultLeaseMs, level, limit, plain);
  return known && !known.rated ? [claim] : [claim, spendTokensStmt(now, ns, queue)];
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
    envelope: typeof r.envelope_text === 'string' ? utf8(r.envelope_text) : fromHex(String(r.envelope_hex ?? '')),
    attempt: Number(r.attempt),
    budgetAttempt: Number(r.budget_attempt),
    leaseUntil: Number(r.lease_until),
    priority: Number(r.priority),
  };
}
