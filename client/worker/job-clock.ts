/**
 * The worker's one timer for its running jobs: each job's heartbeats and its time limit.
 *
 * A job used to hold a `setInterval` for its heartbeats and a `setTimeout` for its limit (600 s by
 * default, so every job had one). Two timers, their closures and the timer list's bookkeeping cost
 * a worker about 5 µs a job, a tenth of its CPU on a queue of short jobs (`bench/worker-cpu.ts`).
 * Here a job is one entry in a set, and one timer is armed at the earliest time any entry is due:
 * most jobs end long before their first heartbeat, so they touch no timer at all.
 */

/** A running job as the clock sees it. */
export interface Watched {
  /** performance.now() at which its next heartbeat is due. */
  beatAt: number;
  /** performance.now() past which its time limit has run out; Infinity: none. */
  limitAt: number;
  /** Sends a heartbeat (the job skips it while one is on its way). */
  beat(): void;
  /** Its time limit ran out: aborts it. Called once. */
  expire(): void;
}

export class JobClock {
  private readonly jobs = new Set<Watched>();
  private timer: ReturnType<typeof setTimeout> | null = null;
  /** When the armed timer fires; Infinity while none is. */
  private armedFor = Infinity;

  private readonly heartbeatMs: number;

  constructor(heartbeatMs: number) {
    this.heartbeatMs = heartbeatMs;
  }

  /** Watches a job that starts now, with a time limit of `limitMs` (null: none); answers how to stop. */
  watch(beat: () => void, expire: () => void, limitMs: number | null): () => void {
    const now = performance.now();
    const w: Watched = { beatAt: now + this.heartbeatMs, limitAt: limitMs ? now + limitMs : Infinity, beat, expire };
    this.jobs.add(w);
    if (this.jobs.size === 1) hold(this.timer, true);
    this.arm(Math.min(w.beatAt, w.limitAt));
    return () => {
      // With no job left the armed timer no longer keeps the process alive (as the jobs' own timers
      // did not once they were cleared); it fires to find nothing, or the next job holds it again.
      if (this.jobs.delete(w) && this.jobs.size === 0) hold(this.timer, false);
    };
  }

  /** Arms the timer for `at` unless it fires by then already. */
  private arm(at: number): void {
    if (at >= this.armedFor) return;
    if (this.timer) clearTimeout(this.timer);
    this.armedFor = at;
    this.timer = setTimeout(() => this.tick(), Math.max(0, at - performance.now()));
  }

  /** Beats and expires what is due, then arms the timer for the next that will be (if any job is left). */
  private tick(): void {
    this.timer = null;
    this.armedFor = Infinity;
    // A millisecond's slack: a timer may fire a fraction early on this clock.
    const now = performance.now() + 1;
    let next = Infinity;
    for (const w of this.jobs) {
      if (w.limitAt <= now) {
        this.jobs.delete(w);
        survive(w.expire);
        continue;
      }
      if (w.beatAt <= now) {
        w.beatAt = now - 1 + this.heartbeatMs;
        survive(w.beat);
      }
      next = Math.min(next, w.beatAt, w.limitAt);
    }
    if (next < Infinity) this.arm(next);
  }
}

/** Keeps the process alive for a timer, or not (Node's ref/unref; other runtimes have neither). */
function hold(timer: ReturnType<typeof setTimeout> | null, on: boolean): void {
  const t = timer as { ref?: () => void; unref?: () => void } | null;
  if (on) t?.ref?.();
  else t?.unref?.();
}

/** Runs one job's part of a tick: a throw there must not stop the other jobs' heartbeats. */
function survive(f: () => void): void {
  try {
    f();
  } catch {
    // The job's own code reports its failures; the clock goes on.
  }
}
