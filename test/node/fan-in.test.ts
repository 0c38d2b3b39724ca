/**
 * Fan-in: many producers, each making single submits, as separate requests at once (separate
 * connections, no client-side coalescing). The Worker carries the single submits that arrive while
 * a call to their queue object is in flight in one call (src/worker/submit-lane.ts); each must still
 * get exactly the answer a lone submit gets: created or not, the id its key already names, its own
 * error. Real workerd (`wrangler dev`), where each request has its own I/O context.
 */
import { describe, expect, it } from 'vitest';
import { inject } from 'vitest';
import { Agent } from 'undici';
import { freshNs } from './setup/client.ts';

describe('single submits from many producers at once', () => {
  it("ride shared calls to the queue object, and each gets a lone submit's answer", async () => {
    const ns = freshNs();
    const url = inject('planeUrl');
    const headers = { authorization: `Bearer ${inject('planeToken')}`, 'content-type': 'application/json' };
    const dispatcher = new Agent({ connections: 400 });
    const post = async (queue: string, body: Record<string, unknown>) => {
      const r = await fetch(`${url}/v1/ns/${ns}/queues/${queue}/invocations`, {
        method: 'POST',
        headers,
        body: JSON.stringify({ envelope: 'eA==', ...body }),
        dispatcher,
      } as RequestInit);
      return { status: r.status, body: (await r.json()) as { id?: string; created?: boolean; error?: { code: string; message: string } } };
    };
    expect((await post('elsewhere', { id: 'taken' })).status).toBe(201);
    const calls0 = await stats(url, ns, headers);

    const ids = Array.from({ length: 250 }, (_, i) => `j${i}`);
    const requests: Record<string, unknown>[] = [
      ...ids.map((id) => ({ id })),
      ...ids.slice(0, 25).map((id) => ({ id })), // repeats of an id
      ...Array.from({ length: 25 }, (_, i) => ({ id: `k${i}`, key: `key${i % 5}` })), // five keys, five submits each
      ...Array.from({ length: 5 }, () => ({ id: 'taken' })), // an id of another queue: 409
      ...Array.from({ length: 5 }, (_, i) => ({ id: `bad${i}`, delay_ms: -1 })), // 400
    ];
    const answers = await Promise.all(requests.map((b) => post('fan', b)));
    await dispatcher.close();

    const of = (pred: (b: Record<string, unknown>) => boolean) => answers.filter((_, i) => pred(requests[i]!));
    // Each id created exactly once; its repeat answered as existing, with its id.
    const repeated = new Set(ids.slice(0, 25));
    for (const id of ids) {
      const mine = answers.filter((_a, i) => requests[i]!.id === id);
      expect(mine.map((a) => a.status).sort(), id).toEqual(repeated.has(id) ? [200, 201] : [201]);
      expect(mine.every((a) => a.body.id === id)).toBe(true);
    }
    // Each key: one created, the others answered with the id it names.
    for (let k = 0; k < 5; k++) {
      const mine = of((b) => b.key === `key${k}`);
      const created = mine.filter((a) => a.status === 201);
      expect(created).toHaveLength(1);
      expect(mine.every((a) => a.body.id === created[0]!.body.id)).toBe(true);
    }
    expect(of((b) => b.id === 'taken').map((a) => [a.status, a.body.error?.code])).toEqual(Array(5).fill([409, 'conflict']));
    expect(of((b) => String(b.id).startsWith('bad')).map((a) => [a.status, a.body.error?.code])).toEqual(
      Array(5).fill([400, 'bad_request']),
    );

    const count = await fetch(`${url}/v1/ns/${ns}/queues/fan/count`, { headers }).then((r) => r.json() as Promise<{ count: number }>);
    expect(count.count).toBe(250 + 5);
    // They shared calls: fewer calls reached the queue object than requests were made.
    const calls = (await stats(url, ns, headers)) - calls0;
    expect(calls).toBeLessThan(requests.length);
  }, 60_000);
});

async function stats(url: string, ns: string, headers: Record<string, string>): Promise<number> {
  const s = (await fetch(`${url}/v1/ns/${ns}/queues/fan/stats`, { headers }).then((r) => r.json())) as { calls: number };
  return s.calls;
}
