/**
 * How far ahead a worker claims. A fixed number is wrong both ways: too few and a worker with
 * short jobs waits a claim round trip for each batch; too many and slow jobs sit in one
 * worker's buffer, their leases running, while other workers idle. `auto` sizes the window as
 * TCP does, by bandwidth times delay: the jobs this worker finishes per second while it has work
 * (its pace: per busy second, so time spent waiting for its own claims does not shrink it),
 * times the time a claim takes, times a margin, between 0 and `max`. Short jobs on a far plane
 * get a deep buffer; a worker whose jobs take seconds claims only what it can start.
 */
export class Prefetch {
  private readonly fixed: number | null;
  private readonly max: number;
  private finished = 0;
  private readonly now: () => number;
  private since: number;
  private rate = 0; // jobs per second, smoothed
  private pace = 0; // jobs per second of busy time (every handler taken or jobs waiting), smoothed
  private busySince: number | null = null;
  private busyMs = 0; // busy time in the current measurement
  private rttMs = 5; // one claim round trip, smoothed
  private cut = -Infinity; // when overshot() last halved the pace

  /** `now`: a clock in ms (default performance.now); tests inject one. */
  constructor(setting: number | 'auto', max = 1000, now: () => number = () => performance.now()) {
    this.fixed = setting === 'auto' ? null : Math.max(0, setting);
    this.max = max;
    this.now = now;
    this.since = now();
  }

  /**
   * Jobs to claim beyond the free handler slots, now. A claimed job's lease runs while it waits
   * in the buffer, so the window never holds more than a quarter-lease of work at this pace.
   */
  depth(leaseMs: number): number {
    if (this.fixed !== null) return this.fixed;
    this.sample();
    // Sized by the pace the worker keeps while it has work, not by how many jobs it finished: a
    // worker starved by its own small window finishes few, which kept the window small.
    const wanted = (this.pace * this.rttMs * 8) / 1000;
    const safe = (this.pace * leaseMs) / 4000;
    return Math.min(this.max, Math.ceil(Math.min(wanted, safe)));
  }

  /** How many jobs this worker may expect to finish in the next `ms` at its current pace. */
  jobsWithin(ms: number): number {
    this.sample();
    return (this.rate * ms) / 1000;
  }

  /**
   * A claimed job waited in the buffer past its lease: the window was deeper than this worker's
   * real pace (after a plane restart, say, the pace measured before it no longer holds). Halve the
   * pace it is sized by, at most once per measurement, as TCP halves its window on a loss.
   */
  overshot(): void {
    const now = this.now();
    if (now - this.cut < 100) return;
    this.cut = now;
    this.rate /= 2;
    this.pace /= 2;
  }

  jobDone(): void {
    this.finished++;
  }

  /**
   * Whether the worker is busy now: every handler taken, or claimed jobs waiting to start.
   * `drained`: nothing runs or waits. The first time, that ends the first measurement at once
   * (rather than at its 100 ms), so a worker's second claim is already sized by its pace.
   */
  busy(on: boolean, drained = false): void {
    if (on && this.busySince === null) this.busySince = this.now();
    else if (!on && this.busySince !== null) {
      this.busyMs += this.now() - this.busySince;
      this.busySince = null;
    }
    if (drained && this.pace === 0 && this.finished > 0) this.sample(true);
  }

  claimTook(ms: number): void {
    this.rttMs = 0.7 * this.rttMs + 0.3 * ms;
  }

  /** Takes a measurement every 100 ms; `early`: now, if any time has passed (the first one, see busy). */
  private sample(early = false): void {
    const now = this.now();
    const dt = now - this.since;
    if (dt < 100 && !(early && dt > 0)) return;
    if (this.busySince !== null) {
      this.busyMs += now - this.busySince;
      this.busySince = now;
    }
    // Smoothed, but the first measurement stands alone (not halved by the zero before it).
    const w = this.pace === 0 ? 1 : 0.5;
    this.rate = (1 - w) * this.rate + w * ((this.finished * 1000) / dt);
    // No busy time: jobs ran one at a time as they came; the pace is the rate.
    this.pace = (1 - w) * this.pace + w * ((this.finished * 1000) / (this.busyMs >= 1 ? Math.min(dt, this.busyMs) : dt));
    this.finished = 0;
    this.busyMs = 0;
    this.since = now;
  }
}
