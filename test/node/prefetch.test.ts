/** The worker's claim window: fixed when given, else sized by job pace (while busy) times claim round trip. */
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
    expect(fast.depth(100)).toBeLessThanOrEqual(105); // never more than a quarter-lease of work (4,167 jobs/s x 25 ms)

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

  it('auto: sized by the pace kept while busy, so a worker starved by its own small window opens it', () => {
    // Each round: a claim of 100 fast jobs runs in 10 ms, then the worker idles 110 ms for the next.
    const p = new Prefetch('auto', 1000, now);
    p.claimTook(20);
    for (let i = 0; i < 3; i++) {
      p.busy(true);
      for (let j = 0; j < 100; j++) p.jobDone();
      elapse(10);
      p.busy(false);
      elapse(110);
      void p.depth(30_000);
    }
    // ~10,000 jobs/s while busy (8,750 smoothed) x the smoothed round trip (9.5 ms) x 8: ~665.
    // Sized by what it finished per wall second (~830/s, ~730 smoothed) it stays at ~56.
    expect(p.depth(30_000)).toBeGreaterThan(500);
    expect(p.jobsWithin(25)).toBeLessThan(25); // acks still wait by what it actually finishes
  });

  it('auto: the first claim, once run, sizes the next one at once (not at the first 100 ms measurement)', () => {
    const p = new Prefetch('auto', 2000, now);
    p.claimTook(60); // a first claim that took 60 ms
    expect(p.depth(30_000)).toBe(0);
    p.busy(true);
    for (let j = 0; j < 8; j++) p.jobDone(); // its 8 jobs run in 1 ms
    elapse(1);
    p.busy(false, true); // and nothing is left
    // 8,000 jobs/s (taken whole, not halved by the zero before it) x 21.5 ms x 8: ~1,376.
    expect(p.depth(30_000)).toBeGreaterThan(1000);
  });
});
