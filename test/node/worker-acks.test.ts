/** runWorker sends a busy worker's acks with its next claim (ackAndClaim), on both planes. */
import { describe, expect, it } from 'vitest';
import { until } from '../support/wait.ts';
import { encodeEnvelope, runWorker } from '../../client/local/index.ts';
import { bothPlanes } from './setup/client.ts';

const planes = bothPlanes('acks');

describe.each(planes)('worker acks on the %s plane', (_name, make) => {
  it('a busy worker acks through its claims; every job succeeds once', async () => {
    const d = make();
    const N = 3000;
    for (let i = 0; i < N; i += 500) {
      await d.submitMany(
        'fast',
        Array.from({ length: 500 }, (_, j) => ({ envelope: encodeEnvelope({ fn: 'noop', args: [] }), opts: { id: `f${i + j}` } })),
      );
    }
    // Count how the acks travel: with a claim (ackAndClaim) or on their own (ack).
    let riding = 0;
    let alone = 0;
    const counted = new Proxy(d, {
      get(target, prop, recv) {
        if (prop === 'ackAndClaim')
          return (q: string, w: string, acks: unknown[], ...rest: unknown[]) => {
            riding += acks.length;
            return (target.ackAndClaim as any)(q, w, acks, ...rest);
          };
        if (prop === 'ack')
          return (...args: unknown[]) => {
            alone++;
            return (target.ack as any)(...args);
          };
        const v = Reflect.get(target, prop, recv);
        return typeof v === 'function' ? v.bind(target) : v;
      },
    });
    const stop = new AbortController();
    const outcomes = new Map<string, string>();
    const ran = runWorker('fast', {
      dispatch: counted,
      concurrency: 8,
      registry: { noop: () => null },
      stop: stop.signal,
      onJob: (id, outcome) => {
        expect(outcomes.has(id)).toBe(false);
        outcomes.set(id, outcome);
        if (outcomes.size === N) stop.abort();
      },
    });
    expect(await ran).toBe(N);
    expect([...outcomes.values()].every((o) => o === 'succeeded')).toBe(true);
    expect(await d.count('fast', 'succeeded')).toBe(N);
    expect(riding + alone).toBe(N);
    expect(riding).toBeGreaterThan(N / 2); // work flowed the whole time: most acks rode claims
    await d.close();
  });

  it('an ack refused because the lease ran out ends the job as lost: no ERROR frame, no nack', async () => {
    const d = make();
    await d.submit('slow', encodeEnvelope({ fn: 'slow', args: [] }), { id: 's1' });
    const calls = { nack: 0, journalAppend: 0 };
    const counted = new Proxy(d, {
      get(target, prop, recv) {
        if (prop === 'nack' || prop === 'journalAppend') calls[prop]++;
        const v = Reflect.get(target, prop, recv);
        return typeof v === 'function' ? v.bind(target) : v;
      },
    });
    const stop = new AbortController();
    let outcome = '';
    let started = false;
    let finish!: () => void;
    const handlerEnds = new Promise<void>((r) => (finish = r));
    const ran = runWorker('slow', {
      dispatch: counted,
      concurrency: 1,
      leaseMs: 100,
      heartbeatMs: 60_000,
      prefetch: 0,
      stop: stop.signal,
      registry: {
        slow: () => {
          started = true;
          return handlerEnds;
        },
      },
      onJob: (_id, o) => {
        outcome = o;
        stop.abort();
      },
    });
    // While the handler works, its lease (100 ms) runs out and another worker takes the job.
    await until(() => started, 'the handler to start');
    const lease = (await d.get('s1'))!.leaseUntil!;
    await until(() => Date.now() > lease, 'the 100 ms lease to run out');
    const other = await d.claim('slow', 'other');
    expect(other?.attempt).toBe(2);
    finish();
    await ran;
    expect(outcome).toBe('lost');
    expect(calls).toEqual({ nack: 0, journalAppend: 0 });
    expect((await d.get('s1'))!.state).toBe('running'); // still the other worker's
    await d.close();
  });
});
