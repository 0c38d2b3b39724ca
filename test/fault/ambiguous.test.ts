/**
 * Ambiguous responses: the plane commits, the answer is lost on the way back, the client retries.
 * A retried keyed submit, ack or append must create no duplicate. AMBIGUOUS_N rounds (10 in CI,
 * 100 with `npm run fault`).
 */
import { describe, expect, it } from 'vitest';
import { inject } from 'vitest';
import { FrameKind, HttpDispatch, UnavailableError } from '../../client/local/index.ts';
import { client } from '../node/setup/client.ts';
import { startProxy } from './proxy.ts';

const N = Number(process.env.AMBIGUOUS_N ?? 10);

/** Calls `fn` until it answers; a dropped answer surfaces as UnavailableError (the connection was cut), which is retried. */
async function retried<T>(fn: () => Promise<T>): Promise<{ value: T; tries: number }> {
  for (let tries = 1; ; tries++) {
    try {
      return { value: await fn(), tries };
    } catch (e) {
      if (tries > 5 || !(e instanceof UnavailableError)) throw e; // the answer was lost
    }
  }
}

describe('fault: ambiguous responses', () => {
  it(`retried submits, acks and appends after lost answers create no duplicates (${N} rounds)`, async () => {
    const proxy = await startProxy(inject('planeUrl'));
    try {
      const direct = client();
      // No coalescing: each call is its own request, so each drop hits exactly one call.
      // No coalescing and no retries of its own: each call is one request, and each dropped answer surfaces here.
      const flaky = new HttpDispatch(proxy.url, {
        token: inject('planeToken'),
        namespace: direct.namespace,
        coalesce: false,
        retryForMs: 0,
      });
      let retries = 0;
      const ids: string[] = [];
      for (let i = 0; i < N; i++) {
        proxy.dropNext(1);
        const sub = await retried(() => flaky.submit('q', new Uint8Array([i]), { id: `s${i}-${Math.random()}`, key: `key-${i}` }));
        retries += sub.tries - 1;
        const c = await flaky.claim('q', 'w');
        expect(c!.id).toBe(sub.value);
        ids.push(c!.id);
        proxy.dropNext(1);
        retries +=
          (await retried(() => flaky.journalAppend(c!.id, 0, { kind: FrameKind.VALUE, seq: 0, body: new Uint8Array([7]), meta: null })))
            .tries - 1;
        proxy.dropNext(1);
        retries += (await retried(() => flaky.ack(c!.id, 'w', { result: new Uint8Array([i]) }))).tries - 1;
      }
      // One invocation per key, acked once, and one frame each: no retry made a duplicate.
      expect(await direct.count('q', 'succeeded')).toBe(N);
      for (const st of ['queued', 'running', 'failed', 'cancelled'] as const) expect(await direct.count('q', st)).toBe(0);
      let frames = 0;
      for (const id of ids) for await (const f of direct.journalRead(id, { timeoutMs: 5_000 })) frames += f.seq === 0 ? 1 : 100;
      console.log(`ambiguous: ${proxy.dropped} answers dropped, ${retries} retries, ${N} invocations, ${frames} frames, duplicates 0`);
      expect(frames).toBe(N);
      expect(proxy.dropped).toBe(3 * N);
      expect(retries).toBe(3 * N);
    } finally {
      await proxy.close();
    }
  }, 600_000);
});
