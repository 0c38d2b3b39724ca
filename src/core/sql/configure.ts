/** A queue's settings row: change some settings, pause and resume, read them back. */
import type { Plan } from '../plan.ts';
import { stmt } from '../port.ts';
import type { SettingsPatch } from '../requests.ts';
import type { QueueInfo } from '../types.ts';

const COLUMNS = [
  'lease_ms',
  'max_attempts',
  'max_running',
  'claims_per_second',
  'backoff',
  'dead_letter_queue',
  'ttl_ms',
  'retention_ms',
  'time_limit_ms',
] as const;

/**
 * configure: the settings the patch names change (a null clears one); the others keep their
 * value. One upsert, the patch a JSON parameter: `json_type` tells a key given as null (cleared)
 * from a key left out (kept). A new claim rate starts with a full bucket.
 */
export const configurePlan = (now: number, ns: string, queue: string, patch: SettingsPatch): Plan<void> => ({
  stmts: [
    stmt(
      `INSERT INTO queues (ns, queue, updated_at, ${COLUMNS.join(', ')})
       VALUES (?1, ?2, ?3, ${COLUMNS.map((c) => `?4 ->> '$.${c}'`).join(', ')})
       ON CONFLICT (ns, queue) DO UPDATE SET updated_at = excluded.updated_at,
         ${COLUMNS.map((c) => `${c} = CASE WHEN json_type(?4, '$.${c}') IS NULL THEN ${c} ELSE excluded.${c} END`).join(',\n         ')},
         claim_tokens = CASE WHEN json_type(?4, '$.claims_per_second') IS NULL THEN claim_tokens END`,
      ns,
      queue,
      now,
      JSON.stringify(patch),
    ),
  ],
  done: () => undefined,
});

/** pause / resume: a paused queue takes submits but hands out nothing. */
export const pausePlan = (now: number, ns: string, queue: string, paused: boolean): Plan<void> => ({
  stmts: [
    stmt(
      `INSERT INTO queues (ns, queue, updated_at, paused) VALUES (?1, ?2, ?3, ?4)
       ON CONFLICT (ns, queue) DO UPDATE SET paused = excluded.paused, updated_at = excluded.updated_at`,
      ns,
      queue,
      now,
      paused ? 1 : 0,
    ),
  ],
  done: () => undefined,
});

const num = (v: unknown) => (v === null || v === undefined ? null : Number(v));

/** A queue's settings and paused flag; defaults (all null, not paused) for a queue without a row. */
export const queueInfoPlan = (ns: string, queue: string): Plan<QueueInfo> => ({
  stmts: [stmt(`SELECT * FROM queues WHERE ns = ?1 AND queue = ?2`, ns, queue)],
  done: ([r]) => {
    const q = r!.rows[0] ?? {};
    const b =
      typeof q.backoff === 'string'
        ? (JSON.parse(q.backoff) as { initial_ms: number; factor: number; max_ms: number; jitter: number })
        : null;
    return {
      queue,
      paused: Number(q.paused ?? 0) === 1,
      settings: {
        leaseMs: num(q.lease_ms),
        maxAttempts: num(q.max_attempts),
        maxRunning: num(q.max_running),
        claimsPerSecond: num(q.claims_per_second),
        retryBackoff: b && { initialMs: b.initial_ms, factor: b.factor, maxMs: b.max_ms, jitter: b.jitter },
        deadLetterQueue: (q.dead_letter_queue as string | null | undefined) ?? null,
        ttlMs: num(q.ttl_ms),
        retentionMs: num(q.retention_ms),
        timeLimitMs: num(q.time_limit_ms),
      },
    };
  },
});
