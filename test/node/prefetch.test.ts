/** The worker's claim window: fixed when given, else sized by job pace times claim round trip. */
import { describe, expect, it } from 'vitest';
import { Prefetch } from '../../client/worker/prefetch.ts';

/** A clock the test moves; each Prefetch below reads it instead of performance.now(). */
const clock = { t: 0 };
const now = () => clock.t;
const elapse = (ms: number) => void (clock.t += ms);

describe('prefetch', () => {
  it('is the number given', () => {
    expect(new Prefetch(0, 1000, now).depth(30_000)).toBe(0);
    expect(new Prefetch(32).depth(30_000)).toBe(32);
  });

  it('auto: deep for short jobs on a slow claim, about nothing for slow jobs, never above max', () => {
    const fast = new Prefetch('auto', 500, now);
    fast.claimTook(20);
    for (let i = 0; i < 3; i++) {
      for (let j = 0; j < 500; j++) fast.jobDone(); // ~4,000 jobs/s
      elapse(120);
      void fast.depth(30_000);
    }
    expect(fast.depth(30_000)).toBeGreaterThan(100);
    expect(fast.depth(30_000)).toBeLessThanOrEqual(500);
    expect(fast.depth(100)).toBeLessThanOrEqual(101); // never more than a quarter-lease of work

    const slow = new Prefetch('auto', 1000, now);
    for (let i = 0; i < 3; i++) {
      slow.jobDone(); // ~8 jobs/s
      elapse(120);
      void slow.depth(30_000);
    }
    expect(slow.depth(30_000)).toBeLessThanOrEqual(1);
  });

  it('jobsWithin: a worker fed fast expects several jobs within 25 ms (its acks ride claims); one fed a job at a time does not', () => {
    const busy = new Prefetch(0, 1000, now);
    const idle = new Prefetch('auto', 1000, now);
    for (let i = 0; i < 3; i++) {
      for (let j = 0; j < 200; j++) busy.jobDone(); // ~1,600 jobs/s
      idle.jobDone(); // ~8 jobs/s
      elapse(120);
      void busy.jobsWithin(25);
      void idle.jobsWithin(25);
    }
    expect(busy.jobsWithin(25)).toBeGreaterThanOrEqual(2);
    expect(idle.jobsWithin(25)).toBeLessThan(2);
  });

  it('overshot: a job that expired in the buffer halves the window, at most once per measurement', () => {
    const p = new Prefetch('auto', 1000, now);
    p.claimTook(20);
    for (let i = 0; i < 3; i++) {
      for (let j = 0; j < 300; j++) p.jobDone();
      elapse(120);
      void p.depth(30_000);
    }
    const before = p.jobsWithin(1000);
    p.overshot();
    p.overshot(); // the same burst of expiries: counted once
    expect(p.jobsWithin(1000)).toBeCloseTo(before / 2, 0);
  });
});
