/** The worker's claim window: fixed when given, else sized by job pace times claim round trip. */
import { describe, expect, it } from 'vitest';
import { Prefetch } from '../../client/worker/prefetch.ts';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('prefetch', () => {
  it('is the number given', () => {
    expect(new Prefetch(0).depth).toBe(0);
    expect(new Prefetch(32).depth).toBe(32);
  });

  it('auto: deep for short jobs on a slow claim, about nothing for slow jobs, never above max', async () => {
    const fast = new Prefetch('auto', 500);
    fast.claimTook(20);
    for (let i = 0; i < 3; i++) {
      for (let j = 0; j < 500; j++) fast.jobDone(); // ~4,000 jobs/s
      await sleep(120);
      void fast.depth;
    }
    expect(fast.depth).toBeGreaterThan(100);
    expect(fast.depth).toBeLessThanOrEqual(500);

    const slow = new Prefetch('auto');
    for (let i = 0; i < 3; i++) {
      slow.jobDone(); // ~8 jobs/s
      await sleep(120);
      void slow.depth;
    }
    expect(slow.depth).toBeLessThanOrEqual(1);
  });
});
