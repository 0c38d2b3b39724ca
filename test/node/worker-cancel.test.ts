/**
 * A running job's cancel reaches its handler as it happens, not at the job's next heartbeat (a
 * third of the lease: 10 s here). On both planes; on the edge the worker holds a worker token, as
 * a deployed worker does.
 */
import { describe, expect, it } from 'vitest';
import { until } from '../support/wait.ts';
import { currentJob, encodeEnvelope, HttpDispatch, runWorker, type DispatchPlane } from '../../client/local/index.ts';
import { bothPlanes } from './setup/client.ts';

describe.each(bothPlanes('cancels'))('a cancel on the %s plane', (name, make) => {
  it('aborts the running handler within moments, its heartbeat 10 s away, and the worker runs on', async () => {
    const d = make();
    let w: DispatchPlane = d;
    if (name === 'edge') {
      const http = d as HttpDispatch;
      const { token } = await http.createToken('worker', { pools: ['q'] });
      w = new HttpDispatch(http.baseUrl, { token, namespace: http.namespace });
    }
    const heard = new Map<string, number>();
    const started = new Set<string>();
    // Holds until its signal aborts, and says when it did.
    const hold = () => {
      const job = currentJob();
      started.add(job.id);
      return new Promise((_, reject) =>
        job.signal.addEventListener('abort', () => {
          heard.set(job.id, Date.now());
          reject(job.signal.reason);
        }),
      );
    };
    const outcomes = new Map<string, string>();
    const stop = new AbortController();
    const ran = runWorker('q', {
      dispatch: w,
      concurrency: 2,
      leaseMs: 30_000,
      registry: { hold, quick: () => 'done' },
      stop: stop.signal,
      graceMs: 100,
      onJob: (id, outcome) => outcomes.set(id, outcome),
    });
    try {
      for (const id of ['a', 'b']) await d.submit('q', encodeEnvelope({ fn: 'hold', args: [] }), { id });
      await until(() => started.size === 2, 'both jobs running');
      // Cancelled at once: its wait, asked once it has run a second, answers it.
      const cancelledAt = Date.now();
      expect(await d.cancel('a')).toBe(true);
      await until(() => heard.has('a'), 'the cancelled handler aborted', 5_000);
      expect(heard.get('a')! - cancelledAt).toBeLessThan(5_000);
      await until(() => outcomes.get('a') === 'cancelled', 'a cancelled');
      expect(heard.has('b'), 'the other job runs on').toBe(false);
      // The slot it held takes the next job.
      await d.submit('q', encodeEnvelope({ fn: 'quick', args: [] }), { id: 'c' });
      await until(() => outcomes.get('c') === 'succeeded', 'the next job ran');
      // b's wait, held meanwhile, is woken by its cancel.
      const bAt = Date.now();
      expect(await d.cancel('b')).toBe(true);
      await until(() => heard.has('b'), 'b aborted', 5_000);
      expect(heard.get('b')! - bAt).toBeLessThan(5_000);
    } finally {
      stop.abort();
      await ran;
      if (w !== d) await w.close();
      await d.close();
    }
  });
});
