/** A queue's settings row: change some settings, pause and resume, read them back. */
import type { Plan } from '../plan.ts';
import { stmt } from '../port.ts';
import type { SettingsPatch } from '../requests.ts';
import type { QueueInfo } from '../types.ts';
import { OLD_SECRET_MS, type PushTarget } from '../push-target.ts';

const COLUMNS = [
  'lease_ms',
  'max_attempts',
  'max_running',
  'claims_per_second',
  'backoff',
  'dead_letter_queue',
  'ttl_ms',
  'retention_ms',
  'journal_retention_ms',
  'time_limit_ms',
  'push_url',
  'push_concurrency',
  'push_timeout_ms',
  'push_batch_size',
] as const;

/**
 * The push secret: kept while the target is only changed; a new one (the patch's) when the queue
 * had none or `push_rotate` asks, the one before then signing too for OLD_SECRET_MS; all cleared
 * when push is turned off (`push_url` given as null). In an UPDATE every right side reads the old row.
 */
const PUSH_SECRET = `
         push_secret = CASE WHEN json_type(?4, '$.push_url') IS NULL THEN push_secret
           WHEN ?4 ->> '$.push_url' IS NULL THEN NULL
           WHEN push_secret IS NULL OR ?4 ->> '$.push_rotate' = 1 THEN excluded.push_secret ELSE push_secret END,
         push_secret_old = CASE WHEN json_type(?4, '$.push_url') IS NULL THEN push_secret_old
           WHEN ?4 ->> '$.push_url' IS NULL THEN NULL
           WHEN push_secret IS NOT NULL AND ?4 ->> '$.push_rotate' = 1 THEN push_secret ELSE push_secret_old END,
         push_secret_old_until = CASE WHEN json_type(?4, '$.push_url') IS NULL THEN push_secret_old_until
           WHEN ?4 ->> '$.push_url' IS NULL THEN NULL
           WHEN push_secret IS NOT NULL AND ?4 ->> '$.push_rotate' = 1 THEN ?3 + ${OLD_SECRET_MS} ELSE push_secret_old_until END,`;

/**
 * configure: the settings the patch names change (a null clears one); the others keep their
 * value. One upsert, the patch a JSON parameter: `json_type` tells a key given as null (cleared)
 * from a key left out (kept). A new claim rate starts with a full bucket.
 */
export const configurePlan = (now: number, ns: string, queue: string, patch: SettingsPatch): Plan<void> => ({
  stmts: [
    stmt(
      `INSERT INTO queues (ns, queue, updated_at, push_secret, ${COLUMNS.join(', ')})
       VALUES (?1, ?2, ?3, ?4 ->> '$.push_secret', ${COLUMNS.map((c) => `?4 ->> '$.${c}'`).join(', ')})
       ON CONFLICT (ns, queue) DO UPDATE SET updated_at = excluded.updated_at,${PUSH_SECRET}
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
        journalRetentionMs: num(q.journal_retention_ms),
        timeLimitMs: num(q.time_limit_ms),
        push:
          typeof q.push_url === 'string'
            ? {
                url: q.push_url,
                concurrency: Number(q.push_concurrency),
                timeoutMs: Number(q.push_timeout_ms),
                batchSize: Number(q.push_batch_size ?? 1),
              }
            : null,
      },
    };
  },
});

/**
 * A queue's push target with the secrets to sign with (newest first; the old one until its time
 * is up), or null when its jobs are pulled. For the plane's pusher only: no route answers it.
 */
export const pushTargetPlan = (now: number, ns: string, queue: string): Plan<PushTarget | null> => ({
  stmts: [
    stmt(
      `SELECT push_url, push_concurrency, push_timeout_ms, push_batch_size, push_secret,
         CASE WHEN push_secret_old_until > ?3 THEN push_secret_old END AS push_secret_old
       FROM queues WHERE ns = ?1 AND queue = ?2`,
      ns,
      queue,
      now,
    ),
  ],
  done: ([r]) => {
    const q = r!.rows[0];
    if (!q || typeof q.push_url !== 'string' || typeof q.push_secret !== 'string') return null;
    return {
      url: q.push_url,
      concurrency: Number(q.push_concurrency),
      timeoutMs: Number(q.push_timeout_ms),
      batchSize: Number(q.push_batch_size ?? 1),
      secrets: [q.push_secret, ...(typeof q.push_secret_old === 'string' ? [q.push_secret_old] : [])],
    };
  },
});
