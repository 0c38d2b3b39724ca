/** The schedules table: set, list, remove, and the tick that submits a schedule's job. */
import { notFound } from '../errors.ts';
import type { Plan } from '../plan.ts';
import { stmt } from '../port.ts';
import { asBytes } from '../rows.ts';
import type { Schedule } from '../types.ts';

/** A schedule to set; its `nextAt` is its first tick after now. */
export type ScheduleInput = Omit<Schedule, 'queue' | 'lastAt'>;

/** Upsert: a changed schedule starts again from its next tick after now; its last tick is kept. */
export const setSchedulePlan = (now: number, ns: string, queue: string, s: ScheduleInput): Plan<void> => ({
  stmts: [
    stmt(
      `INSERT INTO schedules (ns, queue, name, cron, timezone, envelope, priority, next_at, created_at, updated_at)
       VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?9)
       ON CONFLICT (ns, queue, name) DO UPDATE SET cron = excluded.cron, timezone = excluded.timezone, envelope = excluded.envelope,
         priority = excluded.priority, next_at = excluded.next_at, updated_at = excluded.updated_at`,
      ns,
      queue,
      s.name,
      s.cron,
      s.timezone,
      s.envelope,
      s.priority,
      s.nextAt,
      now,
    ),
  ],
  done: () => undefined,
});

const toSchedule = (r: Record<string, unknown>): Schedule => ({
  queue: String(r.queue),
  name: String(r.name),
  cron: String(r.cron),
  timezone: (r.timezone as string | null) ?? null,
  envelope: asBytes(r.envelope) ?? new Uint8Array(),
  priority: Number(r.priority),
  nextAt: Number(r.next_at),
  lastAt: r.last_at === null || r.last_at === undefined ? null : Number(r.last_at),
});

export const listSchedulesPlan = (ns: string, queue: string): Plan<Schedule[]> => ({
  stmts: [stmt(`SELECT * FROM schedules WHERE ns = ?1 AND queue = ?2 ORDER BY name`, ns, queue)],
  done: ([r]) => r!.rows.map(toSchedule),
});

export const removeSchedulePlan = (ns: string, queue: string, name: string): Plan<void> => ({
  stmts: [stmt(`DELETE FROM schedules WHERE ns = ?1 AND queue = ?2 AND name = ?3 RETURNING name`, ns, queue, name)],
  done: ([r]) => {
    if (!r!.rows.length) throw notFound(`schedule ${JSON.stringify(name)} of queue ${JSON.stringify(queue)}`);
  },
});

/**
 * Ticks one fire submits at most: each is a batch of its own, and Cloudflare bounds what one
 * invocation (a queue object's alarm) may ask of D1. A queue with more schedules due at once fires
 * the rest at once, in fires of their own.
 */
export const MAX_TICKS_PER_FIRE = 100;

/** The queue's schedules whose next tick has come, the most overdue first, at most MAX_TICKS_PER_FIRE. */
export const dueSchedulesPlan = (now: number, ns: string, queue: string): Plan<Schedule[]> => ({
  stmts: [
    stmt(
      `SELECT * FROM schedules WHERE ns = ?1 AND queue = ?2 AND next_at <= ?3 ORDER BY next_at, name LIMIT ${MAX_TICKS_PER_FIRE}`,
      ns,
      queue,
      now,
    ),
  ],
  done: ([r]) => r!.rows.map(toSchedule),
});

/**
 * A tick: submits the schedule's job for `tick`, keyed `schedule:<name>:<tick>` (a tick that
 * already submitted inserts nothing: exactly once across restarts, retried alarms and two planes
 * on one file), and moves the schedule on to `next`, guarded by the tick it was due at. One batch.
 * Answers the id of the job it created, or null.
 */
export const tickPlan = (now: number, ns: string, s: Schedule, tick: number, next: number): Plan<string | null> => ({
  stmts: [
    stmt(
      `INSERT INTO invocations (ns, queue, id, key, priority, envelope, state, attempt, created_at, updated_at)
       VALUES (?1, ?2, 'schedule:' || ?2 || ':' || ?3 || ':' || CAST(?4 AS INTEGER), 'schedule:' || ?3 || ':' || CAST(?4 AS INTEGER),
               ?5, ?6, 'queued', 0, ?7, ?7) ON CONFLICT DO NOTHING RETURNING id`,
      ns,
      s.queue,
      s.name,
      tick,
      s.priority,
      s.envelope,
      now,
    ),
    stmt(
      `UPDATE schedules SET next_at = ?5, last_at = ?4, updated_at = ?6 WHERE ns = ?1 AND queue = ?2 AND name = ?3 AND next_at = ?7`,
      ns,
      s.queue,
      s.name,
      tick,
      next,
      now,
      s.nextAt,
    ),
  ],
  done: ([ins]) => (ins!.rows.length ? String(ins!.rows[0]!.id) : null),
});

/**
 * A schedule whose stored expression this plane cannot read any more moves its next tick to never
 * (guarded by the tick it was due at), so one bad row does not keep the queue's alarm firing.
 */
export const parkSchedulePlan = (now: number, ns: string, s: Schedule): Plan<void> => ({
  stmts: [
    stmt(
      `UPDATE schedules SET next_at = ?4, updated_at = ?5 WHERE ns = ?1 AND queue = ?2 AND name = ?3 AND next_at = ?6`,
      ns,
      s.queue,
      s.name,
      Number.MAX_SAFE_INTEGER,
      now,
      s.nextAt,
    ),
  ],
  done: () => undefined,
});
