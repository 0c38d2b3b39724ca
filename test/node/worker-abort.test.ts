/**
 * A running job's AbortSignal, on both planes: a job cancelled while it runs, or one past its time
 * limit, is aborted with its reason, whether the handler was listening when it happened or reads
 * the signal only afterwards (runJob makes the signal when a handler first reads it).
 */
import { describe, expect, it } from 'vitest';
import { until } from '../support/wait.ts';
import { currentJob, encodeEnvelope, runWorker } from '../../client/local/index.ts';
import { bothPlanes } from './setup/client.ts';

describe.each(bothPlanes('abort'))('aborting a running job on the %s plane', (_name, make) => {
  it('a job cancelled while it runs is stopped, and its signal, read only afterwards, says why', async () => {
    const d = make();
    await d.submit('q', encodeEnvelope({ fn: 'late', args: [] }), { id: 'c1' });
    const stop = new AbortController();
    let started = false;
    let open: () => void = () => {};
    const gate = new Promise<void>((r) => (open = r));
    const seen: { aborted?: boolean; reason?: string } = {};
    // It does not touch its signal until the test opens the gate, after the worker has given up on it.
    const late = async () => {
      started = true;
      await gate;
      const s = currentJob().signal;
      seen.aborted = s.aborted;
      seen.reason = (s.reason as Error | undefined)?.message;
    };
    const outcomes = new Map<string, string>();
    const ran = runWorker('q', {
      dispatch: d,
      registry: { late },
      stop: stop.signal,
      heartbeatMs: 50,
      onJob: (id, outcome) => outcomes.set(id, outcome),
    });
    await until(() => started, 'the job to start');
    expect(await d.cancel('c1')).toBe(true);
    await until(() => outcomes.has('c1'), 'the worker to stop the cancelled job');
    expect(outcomes.get('c1')).toBe('cancelled');
    open();
    await until(() => seen.aborted !== undefined, 'the handler to read its signal');
    expect(seen).toEqual({ aborted: true, reason: 'the invocation was cancelled' });
    stop.abort();
    await ran;
    expect((await d.get('c1'))?.state).toBe('cancelled');
    await d.close();
  });

  it('a job past its time limit is aborted with TimeLimitExceeded, and a listening handler hears it', async () => {
    const d = make();
    await d.submit('q', encodeEnvelope({ fn: 'forever', args: [], time_limit_ms: 100, max_retries: 0 }), { id: 't1' });
    const stop = new AbortController();
    const heard: string[] = [];
    // Settles only through its signal.
    const forever = () => {
      const s = currentJob().signal;
      return new Promise((_, reject) =>
        s.addEventListener('abort', () => {
          heard.push((s.reason as Error).name);
          reject(s.reason);
        }),
      );
    };
    const outcomes = new Map<string, string>();
    const ran = runWorker('q', {
      dispatch: d,
      registry: { forever },
      stop: stop.signal,
      onJob: (id, outcome) => outcomes.set(id, outcome),
    });
    await until(() => outcomes.has('t1'), 'the time limit to end the job');
    expect(outcomes.get('t1')).toBe('failed');
    expect(heard).toEqual(['TimeLimitExceeded']);
    const row = await d.get('t1');
    expect(row?.state).toBe('failed');
    expect(row?.error).toMatchObject({ type: 'TimeLimitExceeded' });
    stop.abort();
    await ran;
    await d.close();
  });
});
