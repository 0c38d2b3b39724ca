/**
 * The operators' verbs on a queue: its settings (read, change), pause and resume, redrive of
 * failed jobs and of dead letters, and cron schedules, whose ticks the queue's alarm submits.
 */
import type { Committer } from './committer.ts';
import { badRequest, LakeshoreError } from './errors.ts';
import { STORAGE_FRESH_MS } from './storage.ts';
import { cronOf, storedCron, zoneOf } from './cron.ts';
import type { Limits } from './limits.ts';
import type { Parking } from './park.ts';
import { settingsInput, type SettingsRequest } from './requests.ts';
import { configurePlan, pausePlan, pushTargetPlan, queueInfoPlan } from './sql/configure.ts';
import type { PushHosts, PushTarget } from './push-target.ts';
import { redriveDeadLettersPlan, redrivePlan } from './sql/retry.ts';
import { purgePlan, type Purged } from './sql/purge.ts';
import { FINISHED_STATES, purgeStatePlan, type FinishedState } from './sql/delete.ts';
import { dueSchedulesPlan, listSchedulesPlan, parkSchedulePlan, removeSchedulePlan, setSchedulePlan, tickPlan } from './sql/schedules.ts';
import type { QueueInfo, Schedule } from './types.ts';
import * as v from './validate.ts';
import { keys } from './waiters.ts';
import type { HintBook } from './hints.ts';

/** Finished jobs of one state one retention batch deletes at most. */
export const PURGE_BATCH = 500;

/** Settings and pause change what the hints remember: in commit order, with no batch beside them (committer.ts). */
const ALONE = { alone: true };

export interface ScheduleRequest {
  cron: unknown;
  timezone?: unknown;
  envelope: unknown;
  priority?: unknown;
}

export interface AdminOptions {
  committer: Committer;
  park: Parking;
  limits: Limits;
  now: () => number;
  onWake?: ((ns: string, queue: string, at: number) => void) | undefined;
  hints?: HintBook | undefined;
  /** Throws storage_full while the database refuses new work (engine.ts admitWork). */
  admitWork: () => Promise<void>;
  /** Where push targets may point (push-target.ts); default `local`. */
  pushHosts?: PushHosts | undefined;
  /** The service bindings push targets may name (`service://BINDING/path`); default none. */
  pushServices?: readonly string[] | undefined;
}

export class Admin {
  private readonly o: AdminOptions;

  constructor(o: AdminOptions) {
    this.o = o;
  }

  /**
   * One batch of retention (sql/purge.ts): finished jobs of `queue` past its retention deleted with
   * their frames, at most `batch` per state. Answers whether to run again at once, and when next.
   */
  async purge(ns: string, queue: unknown, batch = PURGE_BATCH): Promise<Purged> {
    const out = await this.o.committer.run(
      purgePlan(this.o.now(), ns, v.queue(queue, this.o.limits), this.o.limits.defaultRetentionMs, batch),
    );
    // Journals whose frames went: what a follower keeps of their tails goes too (as a trim's does).
    for (const id of out.trimmed) this.o.park.tails.drop(keys.journal(ns, id));
    return out;
  }

  async info(ns: string, queue: unknown): Promise<QueueInfo> {
    return this.o.committer.run(queueInfoPlan(ns, v.queue(queue, this.o.limits)));
  }

  /** Changes the settings the request names (a null clears one); answers them all. */
  async configure(ns: string, queue: unknown, req: SettingsRequest): Promise<QueueInfo> {
    const q = v.queue(queue, this.o.limits);
    const patch = settingsInput(req, this.o.limits, q, this.o.pushHosts ?? 'local', this.o.pushServices ?? []);
    await this.o.committer.run(configurePlan(this.o.now(), ns, q, patch), ALONE);
    // A looser cap or rate may let parked claims go.
    this.o.park.wake(keys.queue(ns, q));
    this.o.park.wake(keys.capped(ns, q));
    const info = await this.o.committer.run(queueInfoPlan(ns, q), ALONE);
    this.o.hints?.settings(ns, q, info.settings, info.paused);
    // The secret is shown once: in the answer that set or rotated it.
    if (patch.push_secret && info.settings.push) {
      const t = await this.pushTarget(ns, q);
      if (t?.secrets[0] === patch.push_secret) info.settings.push.secret = t.secrets[0];
    }
    return info;
  }

  /** The queue's push target and signing secrets, or null: for the plane's pusher, never a route. */
  pushTarget(ns: string, queue: string): Promise<PushTarget | null> {
    return this.o.committer.run(pushTargetPlan(this.o.now(), ns, queue));
  }

  /** A paused queue accepts submits but hands out nothing; its parked claims stay parked. */
  async pause(ns: string, queue: unknown): Promise<void> {
    const q = v.queue(queue, this.o.limits);
    await this.o.committer.run(pausePlan(this.o.now(), ns, q, true), ALONE);
    this.o.hints?.paused(ns, q, true);
  }

  /** Resumes a paused queue: its parked claims wake and claim. */
  async resume(ns: string, queue: unknown): Promise<void> {
    const q = v.queue(queue, this.o.limits);
    await this.o.committer.run(pausePlan(this.o.now(), ns, q, false), ALONE);
    this.o.hints?.paused(ns, q, false);
    this.o.park.wake(keys.queue(ns, q));
  }

  /** Retries up to `limit` failed jobs of the queue, oldest first; answers their ids. */
  async redrive(ns: string, queue: unknown, limit: unknown): Promise<string[]> {
    const q = v.queue(queue, this.o.limits);
    const n = v.intInRange('limit', limit, 100, 1, this.o.limits.maxBatch);
    const ids = await this.o.committer.run(redrivePlan(this.o.now(), ns, q, n));
    this.o.park.events.told(
      ns,
      q,
      ids.map((id) => ({ id, status: 'queued' })),
    );
    if (ids.length) this.o.park.wake(keys.queue(ns, q), ids.length);
    return ids;
  }

  /**
   * Deletes up to `limit` (default and most: the plane's batch, 1,000) finished jobs of one state
   * of the queue, oldest submitted first, with their frames; answers how many. Run it again while
   * it answers `limit`.
   */
  async purgeFinished(ns: string, queue: unknown, state: unknown, limit: unknown): Promise<number> {
    const q = v.queue(queue, this.o.limits);
    if (!FINISHED_STATES.includes(state as FinishedState))
      throw badRequest(`state must be one of ${FINISHED_STATES.join(', ')}: only finished jobs are purged, got ${JSON.stringify(state)}`);
    const n = v.intInRange('limit', limit, this.o.limits.maxBatch, 1, this.o.limits.maxBatch);
    return this.o.committer.run(purgeStatePlan(ns, q, state as FinishedState, n));
  }

  /**
   * Sends up to `limit` waiting dead letters of the dead-letter queue `dlq` back: their failed
   * jobs are retried in their own queues, the dead letters cancelled. Answers the retried jobs.
   */
  async redriveDeadLetters(ns: string, dlq: unknown, limit: unknown): Promise<{ id: string; queue: string }[]> {
    const q = v.queue(dlq, this.o.limits);
    const n = v.intInRange('limit', limit, 100, 1, this.o.limits.maxBatch);
    const back = await this.o.committer.run(redriveDeadLettersPlan(this.o.now(), ns, q, n));
    for (const b of back) this.o.park.wake(keys.queue(ns, b.queue), 1);
    return back;
  }

  // ------------------------------------------------------------ schedules

  async setSchedule(ns: string, queue: unknown, name: unknown, req: ScheduleRequest): Promise<Schedule> {
    const q = v.queue(queue, this.o.limits);
    const n = v.name('schedule name', name, this.o.limits.queueLength);
    const timezone = req.timezone === undefined || req.timezone === null ? null : zoneOf(v.text('timezone', req.timezone, 64));
    const cron = cronOf(req.cron, timezone);
    const now = this.o.now();
    const next = cron.nextRun(new Date(now));
    if (!next) throw badRequest(`cron ${JSON.stringify(req.cron)} never fires again`);
    await this.o.committer.run(
      setSchedulePlan(now, ns, q, {
        name: n,
        cron: String(req.cron),
        timezone,
        envelope: v.bytes('envelope', req.envelope, this.o.limits.envelopeBytes),
        priority: v.finite('priority', req.priority, 0),
        nextAt: next.getTime(),
      }),
    );
    this.o.onWake?.(ns, q, next.getTime());
    return (await this.schedules(ns, q)).find((s) => s.name === n)!;
  }

  /** The queue's schedules with their next ticks. */
  async schedules(ns: string, queue: unknown): Promise<Schedule[]> {
    return this.o.committer.run(listSchedulesPlan(ns, v.queue(queue, this.o.limits)));
  }

  async removeSchedule(ns: string, queue: unknown, name: unknown): Promise<void> {
    await this.o.committer.run(
      removeSchedulePlan(ns, v.queue(queue, this.o.limits), v.name('schedule name', name, this.o.limits.queueLength)),
    );
  }

  /**
   * Submits the due ticks of the queue's schedules (the alarm's work). A schedule whose ticks
   * were missed while the plane was down submits the latest of them only, then moves on to its
   * next tick after now: a cron job is about "now", and a burst of stale runs helps no one.
   * Answers how many jobs it submitted.
   */
  async fire(ns: string, queue: string): Promise<number> {
    const now = this.o.now();
    try {
      await this.o.admitWork();
    } catch (e) {
      // Full: no tick submits now. Look again shortly; the latest tick missed meanwhile is
      // submitted once there is room, as after an outage.
      if (!(e instanceof LakeshoreError && e.code === 'storage_full')) throw e;
      this.o.onWake?.(ns, queue, now + STORAGE_FRESH_MS);
      return 0;
    }
    let created = 0;
    // At most MAX_TICKS_PER_FIRE: the rest are still due, and the sweep after this fire wakes the
    // queue for them at once (sql/wake.ts reads the earliest next tick), in a fire of their own.
    for (const s of await this.o.committer.run(dueSchedulesPlan(now, ns, queue))) {
      const cron = storedCron(s.cron, s.timezone);
      if (!cron) {
        // One unreadable row must not keep the alarm firing or stop the others: it stops ticking.
        console.error(
          `schedule ${JSON.stringify(s.name)} of queue ${JSON.stringify(queue)}: cron ${JSON.stringify(s.cron)} cannot be read; it will not fire until it is set again`,
        );
        await this.o.committer.run(parkSchedulePlan(now, ns, s));
        continue;
      }
      const tick = cron.previousRuns(1, new Date(now + 1))[0]?.getTime() ?? s.nextAt;
      const next = cron.nextRun(new Date(now))?.getTime() ?? Number.MAX_SAFE_INTEGER;
      const id = await this.o.committer.run(tickPlan(now, ns, s, Math.max(tick, s.nextAt), next));
      if (id) {
        created++;
        this.o.park.events.told(ns, queue, [{ id, status: 'queued', attempt: 0, submitted: true, envelope: s.envelope }]);
      }
      this.o.onWake?.(ns, queue, next);
    }
    if (created) this.o.park.wake(keys.queue(ns, queue), created);
    return created;
  }
}
