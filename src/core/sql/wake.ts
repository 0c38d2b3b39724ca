import { stmt, type Stmt } from '../port.ts';

/**
 * What a queue waits for, from its rows and settings: the next lease deadline, the next delayed
 * row due, the next TTL to run out, the next schedule tick (the alarm wakes at the earliest), and
 * why a claim may find nothing although work waits (paused; the running cap reached; the claim
 * rate's bucket empty). Each through an index, O(1) rows; the running count only on a capped queue.
 */
export const wakeStmt = (ns: string, queue: string): Stmt =>
  stmt(
    `SELECT (SELECT min(lease_until) FROM invocations WHERE ns = ?1 AND queue = ?2 AND state = 'running') AS lease,
            (SELECT min(run_at) FROM invocations WHERE ns = ?1 AND queue = ?2 AND state = 'delayed') AS due,
            (SELECT min(expires_at) FROM invocations WHERE ns = ?1 AND queue = ?2 AND expires_at IS NOT NULL AND state IN ('delayed', 'queued')) AS ttl,
            (SELECT min(next_at) FROM schedules WHERE ns = ?1 AND queue = ?2) AS cron,
            q.paused AS paused, q.max_running AS max_running, q.claims_per_second AS rate, q.claim_tokens AS tokens, q.claim_tokens_at AS tokens_at,
            CASE WHEN q.max_running IS NOT NULL THEN (SELECT count(*) FROM invocations WHERE ns = ?1 AND queue = ?2 AND state = 'running') END AS running
       FROM (SELECT 1) LEFT JOIN queues q ON q.ns = ?1 AND q.queue = ?2`,
    ns,
    queue,
  );

/** A wakeStmt row, read. */
export interface Wake {
  /** The earliest of lease, due, ttl and schedule: when the queue's alarm should fire. */
  next: number | null;
  lease: number | null;
  due: number | null;
  ttl: number | null;
  paused: boolean;
  /** The queue has a running cap; a claim rate. */
  hasCap: boolean;
  hasRate: boolean;
  /** True when the running cap is reached: a claim finds nothing until a running job ends. */
  capped: boolean;
  /** While the claim rate's bucket is empty: when its next token is there. */
  tokenAt: number | null;
}

const num = (v: unknown) => (v === null || v === undefined ? null : Number(v));

export function wakeOf(r: Record<string, unknown> | undefined, now: number): Wake {
  const lease = num(r?.lease);
  const due = num(r?.due);
  const ttl = num(r?.ttl);
  const times = [lease, due, ttl, num(r?.cron)].filter((t): t is number => t !== null);
  const rate = num(r?.rate);
  let tokenAt: number | null = null;
  if (rate !== null) {
    const burst = Math.max(1, rate);
    const tokens = Math.min(burst, (num(r?.tokens) ?? burst) + ((now - (num(r?.tokens_at) ?? now)) * rate) / 1000);
    if (tokens < 1) tokenAt = now + Math.ceil(((1 - tokens) * 1000) / rate);
  }
  return {
    next: times.length ? Math.min(...times) : null,
    lease,
    due,
    ttl,
    paused: Number(r?.paused ?? 0) === 1,
    hasCap: r?.max_running !== null && r?.max_running !== undefined,
    hasRate: rate !== null,
    capped: r?.max_running !== null && r?.max_running !== undefined && Number(r?.running) >= Number(r?.max_running),
    tokenAt,
  };
}
