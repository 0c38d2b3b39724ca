/** The worker's claim window: fixed when given, else sized by job pace times claim round trip. */
import { describe, expect, it } from 'vitest';
import { Prefetch } from '../../client/worker/prefetch.ts';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('prefetch', () => {
  it('is the number given', () => {
    expect(new Prefetch(0).depth(30_000)).toBe(0);
    expect(new Prefetch(32).depth(30_000)).toBe(32);
  });

  it('auto: deep for short jobs on a slow claim, about nothing for slow jobs, never above max', async () => {
    const fast = new Prefetch('auto', 500);
    fast.claimTook(20);
    for (let i = 0; i < 3; i++) {
      for (let j = 0; j < 500; j++) fast.jobDone(); // ~4,000 jobs/s
      await sleep(120);
      void fast.depth(30_000);
    }
    expect(fast.depth(30_000)).toBeGreaterThan(100);
    expect(fast.depth(30_000)).toBeLessThanOrEqual(500);
    expect(fast.depth(100)).toBeLessThanOrEqual(101); // never more than a quarter-lease of work

    const slow = new Prefetch('auto');
    for (let i = 0; i < 3; i++) {
      slow.jobDone(); // ~8 jobs/s
      await sleep(120);
      void slow.depth(30_000);
    }
    expect(slow.depth(30_000)).toBeLessThanOrEqual(1);
  });
});
