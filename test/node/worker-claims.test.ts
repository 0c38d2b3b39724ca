/**
 * How runWorker sizes its claims: with a claim in flight, a second one goes out only for at least
 * half its window. One sent for the first slot that frees up comes back with a job or two, and
 * until it does the worker may not claim the rest of its window.
 */
import { join } from 'node:path';
import { expect, it } from 'vitest';
import { Dispatch, encodeEnvelope, runWorker } from '../../client/local/index.ts';
import { tempDir } from '../support/tmp.ts';
import { work } from '../support/wait.ts';

it('a claim sent while another is in flight asks for at least half the window', async () => {
  const d = new Dispatch(join(tempDir('lakeshore-claims-'), 'd.sqlite'), { namespace: 'claims' });
  const N = 400;
  await d.submitMany('q', Array.from({ length: N }, (_, i) => ({ envelope: encodeEnvelope({ fn: 'step', args: [i % 7] }), opts: { id: `j${i}` } })));
  // Each claim takes a while (a far plane) and jobs take 0-6 ms, so they finish one by one while one is in flight.
  let inFlight = 0;
  const overlapping: number[] = [];
  const slow = new Proxy(d, {
    get(target, prop, recv) {
      const v = Reflect.get(target, prop, recv);
      if (prop !== 'claimMany' && prop !== 'ackAndClaim') return typeof v === 'function' ? v.bind(target) : v;
      return async (...args: unknown[]) => {
        const want = (prop === 'claimMany' ? args[2] : args[3]) as number;
        if (inFlight > 0) overlapping.push(want);
        inFlight++;
        try {
          await new Promise((r) => setTimeout(r, 20));
          return await (v as (...a: unknown[]) => Promise<unknown>).apply(target, args);
        } finally {
          inFlight--;
        }
      };
    },
  });
  const stop = new AbortController();
  let done = 0;
  const ran = await runWorker('q', { dispatch: slow, concurrency: 8, prefetch: 0, registry: { step: async (ms: number) => { await work(ms); if (++done === N) stop.abort(); } }, stop: stop.signal, claimWaitMs: 100 });
  expect(ran).toBe(N);
  expect(overlapping.length, 'some claims overlapped (else this test says nothing)').toBeGreaterThan(0);
  expect(Math.min(...overlapping)).toBeGreaterThanOrEqual(4); // window 8 (concurrency 8, no prefetch)
  await d.close();
});
