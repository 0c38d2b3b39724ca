/**
 * Each job's life as a local plane's feed tells it, read by one process from every process on the
 * file: for the tests that check the feed's order across processes.
 */
import { expect } from 'vitest';
import type { Dispatch } from '../../client/local/index.ts';
import { until } from './wait.ts';

/** Starts reading `d`'s feed and waits until the reader is in place (a probe job's record reached it). */
export async function followLives(d: Dispatch) {
  const ac = new AbortController();
  const lives = new Map<string, string[]>();
  const reading = (async () => {
    for await (const r of d.events(null, { signal: ac.signal }))
      if (r.kind === 'job') lives.set(`${r.queue}/${r.id}`, [...(lives.get(`${r.queue}/${r.id}`) ?? []), r.status]);
  })();
  let probes = 0;
  await until(async () => {
    await d.submit('probe', new Uint8Array([1]), { id: `p${probes++}` });
    return lives.has('probe/p0');
  }, 'the reader in place');
  return {
    /** Waits until `n` jobs of `queue` were told succeeded, then checks each read queued, running, succeeded. */
    async expectInOrder(queue: string, n: number): Promise<void> {
      const mine = () => [...lives].filter(([k]) => k.startsWith(`${queue}/`));
      const done = () => mine().filter(([, l]) => l.includes('succeeded')).length;
      await until(() => done() === n, `${n} jobs told succeeded`).catch((e) => {
        throw new Error(`${e.message}: ${done()} were`);
      });
      expect(
        mine()
          .filter(([, l]) => l.join() !== 'queued,running,succeeded')
          .slice(0, 5),
      ).toEqual([]);
    },
    async stop(): Promise<void> {
      ac.abort();
      await reading;
    },
  };
}
