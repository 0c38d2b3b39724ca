/** A job past its time limit is told whose limit it was, and for the default, how to set one. */
import { describe, expect, it } from 'vitest';
import { limitOf } from '../../client/worker/job.ts';

describe('a time limit, as a job past it is told', () => {
  it('is the job’s own, else its queue’s, else its worker’s, else the default, which says how to set one', () => {
    expect(limitOf(5_000, 300, 600_000, true)).toEqual([5_000, "the job's own"]);
    expect(limitOf(undefined, 300, 600_000, true)).toEqual([300, "its queue's"]);
    expect(limitOf(null, null, 60_000, false)).toEqual([60_000, "its worker's"]);
    const [ms, whose] = limitOf(undefined, null, 600_000, true);
    expect(ms).toBe(600_000);
    expect(whose).toMatch(
      /^the default \(a job sets its own with time_limit_ms, a queue with its time_limit_ms setting, a worker with --time-limit-ms; 0 is none\)$/,
    );
  });
});
