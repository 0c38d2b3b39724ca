/**
 * A worker told to stop claims no more and waits its grace for running jobs; past it, the hard
 * stop aborts every running job's AbortSignal, their jobs go back to the queue (nack with retry),
 * and runWorker returns. On both planes.
 */
import { getEventListeners } from 'node:events';
import { describe, expect, it } from 'vitest';
import { until } from '../support/wait.ts';
import { currentJob, encodeEnvelope, HttpDispatch, runWorker } from '../../client/local/index.ts';
import { freePort } from '../../scripts/plane.mjs';
import { bothPlanes } from './setup/client.ts';

describe.each(bothPlanes('stop'))('stopping a worker on the %s plane', (_name, make) => {
  it('past the grace, every running job is aborted as a shutdown and goes back to the queue', async () => {
    const d = make();
    for (const id of ['a', 'b', 'c']) await d.submit('q', encodeEnvelope({ fn: 'hold', args: [] }), { id });
    const stop = new AbortController();
    const started = new Set<string>();
    const reasons = new Map<string, string>();
    const outcomes = new Map<string, string>();
    // Each job holds until its own signal aborts (it never settles otherwise).
    const hold = () => {
      const job = currentJob();
      started.add(job.id);
      return new Promise((_, reject) =>
        job.signal.addEventListener('abort', () => {
          reasons.set(job.id, (job.signal.reason as Error).message);
          reject(job.signal.reason);
        }),
      );
    };
    const ran = runWorker('q', {
      dispatch: d,
      concurrency: 3,
      registry: { hold },
      stop: stop.signal,
      graceMs: 100,
      onJob: (id, outcome) => outcomes.set(id, outcome),
    });
    await until(() => started.size === 3, 'three running jobs');
    stop.abort();
    const returned = await Promise.race([ran.then(() => true), new Promise((r) => setTimeout(() => r(false), 15_000))]);
    expect(returned, 'runWorker returned after the grace').toBe(true);
    expect([...reasons.values()]).toEqual(Array(3).fill('the worker is shutting down'));
    expect(Object.fromEntries(outcomes)).toEqual({ a: 'retried', b: 'retried', c: 'retried' });
    expect(await d.count('q', 'queued')).toBe(3);
    await d.close();
  });

  it('told to stop now, it aborts its running jobs at once, whatever its grace, and each goes back to the queue', async () => {
    const d = make();
    for (const id of ['a', 'b']) await d.submit('q', encodeEnvelope({ fn: 'deaf', args: [] }), { id });
    const stop = new AbortController();
    const stopNow = new AbortController();
    const started = new Set<string>();
    // Deaf to its signal: the worker cannot wait for it to end.
    const deaf = () => {
      started.add(currentJob().id);
      return new Promise(() => {});
    };
    const ran = runWorker('q', {
      dispatch: d,
      concurrency: 2,
      registry: { deaf },
      stop: stop.signal,
      stopNow: stopNow.signal,
      graceMs: 600_000,
    });
    await until(() => started.size === 2, 'two running jobs');
    stop.abort();
    stopNow.abort();
    const returned = await Promise.race([ran.then(() => true), new Promise((r) => setTimeout(() => r(false), 15_000))]);
    expect(returned, 'runWorker returned, long before its grace').toBe(true);
    for (const id of ['a', 'b']) expect(await d.get(id)).toMatchObject({ state: 'queued', attempt: 1 });
    await d.close();
  });

  it("leaves nothing on the caller's stop signals once it returns", async () => {
    // A program's signals may outlive many workers: each left a listener on them.
    const d = make();
    const stop = new AbortController();
    const stopNow = new AbortController();
    for (let i = 0; i < 3; i++)
      await runWorker('q', { dispatch: d, once: true, onceWaitMs: 10, stop: stop.signal, stopNow: stopNow.signal });
    expect([getEventListeners(stop.signal, 'abort').length, getEventListeners(stopNow.signal, 'abort').length]).toEqual([0, 0]);
    await d.close();
  });

  it('gives the jobs it claimed and never started back uncharged', async () => {
    // A nack would spend an attempt of a job that never ran: a worker stopped twice while holding
    // a job unstarted left it one run where its budget promised three.
    const d = make();
    for (const id of ['first', 'ahead1', 'ahead2']) await d.submit('q', encodeEnvelope({ fn: 'hold', args: [] }), { id });
    const stop = new AbortController();
    let release = () => {};
    const hold = () => new Promise<void>((r) => (release = r));
    const ran = runWorker('q', { dispatch: d, concurrency: 1, prefetch: 3, registry: { hold }, stop: stop.signal });
    await until(async () => (await d.count('q', 'running')) === 3, 'the first job running, two claimed ahead of it');
    stop.abort();
    release();
    await ran;
    expect(await d.get('first')).toMatchObject({ state: 'succeeded' });
    for (const id of ['ahead1', 'ahead2']) expect(await d.get(id)).toMatchObject({ state: 'queued', attempt: 1 });
    const next = await d.claimMany('q', 'other', 2);
    expect(next.map((c) => [c.id, c.attempt, c.budgetAttempt])).toEqual([
      ['ahead1', 2, 1],
      ['ahead2', 2, 1],
    ]);
    await d.close();
  });
});

describe('stopping a worker whose plane is away', () => {
  it('returns at once: saying it stopped is one try, not a wait for the plane', async () => {
    // A client that never gives up (as `worker start`'s), on a port where nothing listens.
    let away = false;
    const d = new HttpDispatch(`http://127.0.0.1:${await freePort()}`, {
      token: 'lsk_none',
      retryForMs: Number.POSITIVE_INFINITY,
      onOutage: (e) => (away = e.away),
    });
    const stop = new AbortController();
    const ran = runWorker('q', { dispatch: d, stop: stop.signal });
    // Once its client has found the plane away (and is retrying), it is asked to stop.
    await until(() => away, 'the client to find the plane away');
    stop.abort();
    const returned = await Promise.race([ran.then(() => true), new Promise((r) => setTimeout(() => r(false), 5_000))]);
    expect(returned, 'runWorker returned, the plane still away').toBe(true);
    await d.close();
  });
});
