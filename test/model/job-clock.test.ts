/**
 * The worker's one timer for its running jobs (client/worker/job-clock.ts): each job's heartbeats
 * come every heartbeatMs while it runs and stop when it ends, and a time limit fires at its own
 * time, not at the time the timer was armed for before the job came.
 */
import { spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { JobClock } from '../../client/worker/job-clock.ts';
import { until } from '../support/wait.ts';

/** A watched job that counts its beats and notes when it expired. */
function job(clock: JobClock, limitMs: number | null) {
  const j = { beats: [] as number[], expiredAt: null as number | null, expires: 0, start: performance.now(), stop: () => {} };
  j.stop = clock.watch(
    () => j.beats.push(performance.now() - j.start),
    () => {
      j.expires++;
      j.expiredAt = performance.now() - j.start;
    },
    limitMs,
  );
  return j;
}

describe('the worker’s job clock', () => {
  it('fires a time limit at its own time when the timer was armed for a later heartbeat', async () => {
    const clock = new JobClock(10_000);
    const long = job(clock, null); // arms the timer for its heartbeat, 10 s away
    const limited = job(clock, 60);
    await until(() => limited.expiredAt !== null, 'the 60 ms limit to fire', 10_000, 5);
    expect(limited.expiredAt).toBeGreaterThanOrEqual(59);
    expect(limited.expires).toBe(1);
    expect(long.expires).toBe(0);
    expect(long.beats).toEqual([]);
    long.stop();
  });

  it('beats each job every heartbeatMs while it runs, never sooner, and not after it ends', async () => {
    const clock = new JobClock(30);
    const a = job(clock, null);
    const b = job(clock, null);
    await until(() => a.beats.length >= 3, 'three beats of the first job', 10_000, 5);
    a.stop();
    const ended = a.beats.length;
    await until(() => b.beats.length >= ended + 3, 'three more beats of the other job', 10_000, 5);
    expect(a.beats.length).toBe(ended);
    // The clock takes what is due within a millisecond (a timer may fire that early).
    for (const beats of [a.beats, b.beats])
      beats.forEach((at, i) => {
        expect(at).toBeGreaterThanOrEqual(28 * (i + 1));
        if (i > 0) expect(at - beats[i - 1]!).toBeGreaterThanOrEqual(28);
      });
    b.stop();
  });

  it('expires a job once, and beats it no more after', async () => {
    const clock = new JobClock(20);
    const limited = job(clock, 70);
    const other = job(clock, null);
    await until(() => limited.expiredAt !== null, 'the limit to fire', 10_000, 5);
    const beatsThen = limited.beats.length;
    await until(() => other.beats.length >= beatsThen + 3, 'three more beats of the other job', 10_000, 5);
    expect(limited.expires).toBe(1);
    expect(limited.beats.length).toBe(beatsThen);
    other.stop();
    limited.stop();
  });

  it('goes on beating the other jobs when one job’s heartbeat throws', async () => {
    const clock = new JobClock(20);
    const stopBad = clock.watch(
      () => {
        throw new Error('a bad heartbeat');
      },
      () => {},
      null,
    );
    const good = job(clock, null);
    await until(() => good.beats.length >= 3, 'three beats of the good job', 10_000, 5);
    stopBad();
    good.stop();
  });

  it('holds the process open while a job runs, and not once the last one ended', () => {
    // A process whose one job ended with its first heartbeat a minute away exits at once; its timer
    // is still armed. The job's own time limit (10 minutes) holds nothing either.
    const clock = new URL('../../client/worker/job-clock.ts', import.meta.url).pathname;
    const script = `import { JobClock } from ${JSON.stringify(clock)};
      const stop = new JobClock(60_000).watch(() => {}, () => {}, 600_000);
      setTimeout(stop, 20);`;
    const out = spawnSync(process.execPath, ['--input-type=module', '-e', script], { timeout: 15_000, encoding: 'utf8' });
    expect(out.signal, 'the process had to be killed: the clock held it open').toBeNull();
    expect(out.status, out.stderr).toBe(0);
  });
});
