/**
 * How runWorker sizes its claims: with a claim in flight, a second one goes out only for at least
 * half its window (one sent for the first slot that frees up comes back with a job or two, and
 * until it does the worker may not claim the rest of its window); and the auto window holds two
 * full claims, so on a far plane one is on its way while the last one's jobs run.
 */
import { join } from 'node:path';
import { expect, it } from 'vitest';
import { currentJob, Dispatch, encodeEnvelope, runWorker } from '../../client/local/index.ts';
import { tempDir } from '../support/tmp.ts';
import { until, work } from '../support/wait.ts';

/** The plane `d` with each claim taking `ms` (a far plane); records what each claim sent while another was in flight asked for. */
function slowClaims(d: Dispatch, ms: number) {
  let inFlight = 0;
  const overlapping: number[] = [];
  const most = { inFlight: 0, reset: () => void (most.inFlight = inFlight) };
  const plane = new Proxy(d, {
    get(target, prop, recv) {
      const v = Reflect.get(target, prop, recv);
      if (prop !== 'claimMany' && prop !== 'ackAndClaim') return typeof v === 'function' ? v.bind(target) : v;
      return async (...args: unknown[]) => {
        const want = (prop === 'claimMany' ? args[2] : args[3]) as number;
        if (inFlight > 0) overlapping.push(want);
        inFlight++;
        most.inFlight = Math.max(most.inFlight, inFlight);
        try {
          await new Promise((r) => setTimeout(r, ms));
          return await (v as (...a: unknown[]) => Promise<unknown>).apply(target, args);
        } finally {
          inFlight--;
        }
      };
    },
  });
  return { plane, overlapping, most };
}

async function queued(n: number, fn: string, args: (i: number) => unknown[]) {
  const d = new Dispatch(join(tempDir('lakeshore-claims-'), 'd.sqlite'), { namespace: 'claims' });
  for (let i = 0; i < n; i += 1000) {
    await d.submitMany(
      'q',
      Array.from({ length: Math.min(1000, n - i) }, (_, k) => ({
        envelope: encodeEnvelope({ fn, args: args(i + k) }),
        opts: { id: `j${i + k}` },
      })),
    );
  }
  return d;
}

it('a claim sent while another is in flight asks for at least half the window', async () => {
  const N = 400;
  const d = await queued(N, 'step', (i) => [i % 7]);
  // Each claim takes a while (a far plane) and jobs take 0-6 ms, so they finish one by one while one is in flight.
  const { plane, overlapping } = slowClaims(d, 20);
  const stop = new AbortController();
  let done = 0;
  const ran = await runWorker('q', {
    dispatch: plane,
    concurrency: 8,
    prefetch: 0,
    registry: {
      step: async (ms: number) => {
        await work(ms);
        if (++done === N) stop.abort();
      },
    },
    stop: stop.signal,
    claimWaitMs: 100,
  });
  expect(ran).toBe(N);
  expect(overlapping.length, 'some claims overlapped (else this test says nothing)').toBeGreaterThan(0);
  expect(Math.min(...overlapping)).toBeGreaterThanOrEqual(4); // window 8 (concurrency 8, no prefetch)
  await d.close();
});

it('with short jobs on a far plane, the auto window holds two full claims: one is on its way while the last one runs', async () => {
  const N = 6000;
  const d = await queued(N, 'noop', () => []);
  const { plane, overlapping } = slowClaims(d, 30);
  const stop = new AbortController();
  let done = 0;
  const ran = await runWorker('q', {
    dispatch: plane,
    concurrency: 8,
    registry: {
      noop: () => {
        if (++done === N) stop.abort();
      },
    },
    stop: stop.signal,
    claimWaitMs: 100,
  });
  expect(ran).toBe(N);
  // A window of one claim (1,000 and the 8 handlers) would let an overlapping claim ask for 504 at most.
  expect(Math.max(...overlapping)).toBe(1000);
  await d.close();
});

it('with no backlog, one claim waits for work, not two (each submit would wake one: a request more per few jobs)', async () => {
  const N = 3000;
  const d = await queued(N, 'noop', () => []);
  const { plane, most } = slowClaims(d, 10);
  const stop = new AbortController();
  let done = 0;
  const ran = runWorker('q', {
    dispatch: plane,
    concurrency: 8,
    registry: { noop: () => void done++ },
    stop: stop.signal,
    claimWaitMs: 5_000,
  });
  // A burst first, so the worker's pace (and its window) is large; then jobs one at a time.
  await until(() => done === N, 'the burst done');
  await until(() => most.inFlight > 0, 'a claim waiting');
  most.reset();
  for (let i = 0; i < 20; i++) {
    await d.submit('q', encodeEnvelope({ fn: 'noop', args: [] }), { id: `t${i}` });
    await until(() => done === N + i + 1, `trickled job ${i}`);
  }
  expect(most.inFlight).toBe(1);
  stop.abort();
  expect(await ran).toBe(N + 20);
  await d.close();
});

it('answers the jobs it started: a buffered job dropped because its lease ran out while it waited is not counted', async () => {
  const d = await queued(4, 'slow', () => []);
  const stop = new AbortController();
  const runs: string[] = [];
  const ran = await runWorker('q', {
    dispatch: d,
    concurrency: 1,
    prefetch: 3,
    leaseMs: 600,
    heartbeatMs: 200,
    claimWaitMs: 100,
    stop: stop.signal,
    registry: {
      slow: async () => {
        const job = currentJob();
        runs.push(`${job.id}@${job.attempt}`);
        // The first job holds the only slot until the three claimed beside it, waiting in the
        // buffer, have let their leases run out (its own is kept by heartbeats).
        if (runs.length === 1)
          await until(
            async () => (await d.list('q', { state: 'running' })).items.every((i) => i.id === job.id || i.leaseUntil! < Date.now()),
            'the buffered leases to run out',
            10_000,
          );
        if (new Set(runs.map((r) => r.split('@')[0])).size === 4 && runs.length >= 4) stop.abort();
      },
    },
  });
  expect(await d.count('q', 'succeeded')).toBe(4);
  expect(
    runs.filter((r) => !r.endsWith('@1')).length,
    'the dropped jobs ran again as later attempts (else this test says nothing)',
  ).toBeGreaterThan(0);
  expect(ran).toBe(runs.length);
  await d.close();
});
