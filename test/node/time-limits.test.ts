/**
 * Time limits, on both planes: a job's own time_limit_ms, else its queue's `time_limit_ms` setting
 * (which a worker reads), else the worker's (default 600 s). The queue's limit aborts a job that
 * names none; a job's own limit wins over its queue's.
 */
import { describe, expect, it } from 'vitest';
import { until, work } from '../support/wait.ts';
import { encodeEnvelope, runWorker } from '../../client/local/index.ts';
import { bothPlanes } from './setup/client.ts';

describe.each(bothPlanes('limits'))('time limits on the %s plane', (_name, make) => {
  it('a queue’s time_limit_ms aborts its jobs that name none; a job’s own limit wins', async () => {
    const d = make();
    await d.configureQueue('tl', { timeLimitMs: 300 });
    const slow = async (ms: number) => {
      await work(ms);
      return 'done';
    };
    await d.submit('tl', encodeEnvelope({ fn: 'slow', args: [3_000] }), { id: 'queue-limit', maxAttempts: 1 });
    await d.submit('tl', encodeEnvelope({ fn: 'slow', args: [600], time_limit_ms: 10_000 }), { id: 'own-limit', maxAttempts: 1 });
    const stop = new AbortController();
    const ran = runWorker('tl', { dispatch: d, registry: { slow }, stop: stop.signal, concurrency: 2 });
    await until(async () => (await d.get('queue-limit'))?.state === 'failed', 'the queue’s limit to end the slow job');
    expect((await d.get('queue-limit'))?.error).toMatchObject({
      last: { type: 'TimeLimitExceeded', message: "the job ran past its time limit of 300 ms, its queue's" },
    });
    await until(async () => (await d.get('own-limit'))?.state === 'succeeded', 'the job with its own limit to finish');
    stop.abort();
    await ran;
    await d.close();
  });
});
