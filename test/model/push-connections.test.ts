/**
 * The pusher (core/push.ts, push-delivery.ts) has at most `connections` deliveries waiting for
 * their receiver's headers at once, whatever its target's concurrency: the edge plane's is 6,
 * Cloudflare's bound on a Durable Object's connections waiting for headers, past which the runtime
 * holds a request unsent with its timeout running. Past the bound a delivery waits in the pusher:
 * its timeout starts when it is sent, and its jobs' leases are extended if the wait ate into them.
 * An answer whose headers came (a 202, a body still streaming) holds no connection.
 */
import { describe, expect, it } from 'vitest';
import type { Ack, PushPort } from '../../src/core/push.ts';
import type { Claimed } from '../../src/core/types.ts';
import { claimFrom, jobsOf, NOW, newPusher } from '../support/pusher.ts';
import { until, work } from '../support/wait.ts';

/** A plane of `n` jobs whose receiver answers as `respond` does, counting what waits for headers. */
function plane(n: number, respond: (c: { id: string }) => Promise<Response>) {
  const waiting = jobsOf(n);
  const s = {
    acked: new Set<string>(),
    nacked: new Map<string, string>(),
    sent: [] as string[],
    awaiting: 0,
    mostAwaiting: 0,
    extended: new Map<string, number>(),
  };
  const ack = (items: Ack[]) => {
    for (const a of items) s.acked.add(a.c.id);
    return items.map(() => null);
  };
  const port: PushPort = {
    claim: claimFrom((max) => waiting.splice(0, max)),
    ackMany: async (items) => ack(items),
    ackAndClaim: async (acks, max) => ({ acks: ack(acks), claimed: waiting.splice(0, max) }),
    nack: async (c, error) => {
      s.nacked.set(c.id, error.message);
      return { state: 'delayed', runAt: NOW + 10_000 };
    },
    deliveryToken: async () => null,
    fetch: async (_url, init) => {
      const { id } = JSON.parse(String(init.body)) as { id: string };
      s.sent.push(id);
      s.awaiting++;
      s.mostAwaiting = Math.max(s.mostAwaiting, s.awaiting);
      try {
        return await respond({ id });
      } finally {
        s.awaiting--;
      }
    },
  };
  return { port, s };
}

describe('the connections a pusher holds', () => {
  it('waits for at most `connections` receivers at once, and times each delivery from its send', async () => {
    // Receivers that work 150 ms before answering, 30 jobs at a concurrency of 16 over 6
    // connections: the last wait about 600 ms for theirs, past the 400 ms timeout.
    const { port, s } = plane(30, async () => {
      await work(150);
      return new Response('"ok"', { headers: { 'content-type': 'application/json' } });
    });
    const p = newPusher(port, { concurrency: 16, connections: 6, timeoutMs: 400 });
    p.start();
    try {
      await until(() => s.acked.size + s.nacked.size === 30, 'thirty jobs settled');
    } finally {
      await p.stop();
    }
    expect([...s.nacked]).toEqual([]);
    expect(s.acked.size).toBe(30);
    expect(s.mostAwaiting).toBe(6);
  });

  it('holds no connection for an answer whose headers came: 12 bodies stream at once', async () => {
    const ends: (() => void)[] = [];
    const { port, s } = plane(12, async () => {
      const body = new ReadableStream<Uint8Array>({
        start: (c) => {
          c.enqueue(new TextEncoder().encode('"o'));
          ends.push(() => {
            c.enqueue(new TextEncoder().encode('k"'));
            c.close();
          });
        },
      });
      // Its length said, it reserves only that of the answers' budget (push-answers.ts).
      return new Response(body, { headers: { 'content-type': 'application/json', 'content-length': '4' } });
    });
    const p = newPusher(port, { concurrency: 16, connections: 6 });
    p.start();
    try {
      await until(() => ends.length === 12, 'twelve answers streaming at once');
      for (const end of ends.splice(0)) end();
      await until(() => s.acked.size === 12, 'twelve jobs acked');
    } finally {
      for (const end of ends.splice(0)) end();
      await p.stop();
    }
    expect(s.mostAwaiting).toBeLessThanOrEqual(6);
  });

  it('extends the leases a wait for a connection ate into before sending, and sends no job it no longer holds', async () => {
    let now = NOW;
    const answers: (() => void)[] = [];
    const { port, s } = plane(8, () => new Promise<Response>((r) => answers.push(() => r(new Response('"ok"')))));
    port.extend = async (c: Claimed, leaseMs: number) => {
      if (c.id === 'j7') throw new Error('invocation j7 was cancelled');
      s.extended.set(c.id, leaseMs);
      return now + leaseMs;
    };
    const p = newPusher(port, { concurrency: 8, connections: 6, timeoutMs: 5_000, now: () => now });
    p.start();
    try {
      await until(() => answers.length === 6, 'six receivers holding their answer');
      // The others wait for a connection while their leases (NOW + 60 s) run down to 2 s.
      now = NOW + 58_000;
      for (const a of answers.splice(0)) a();
      await until(() => s.acked.size === 7 || answers.length > 0, 'the waiting delivery sent');
      for (const a of answers.splice(0)) a();
      await until(() => s.acked.size === 7 && s.nacked.size === 1, 'seven acked, one nacked');
    } finally {
      for (const a of answers.splice(0)) a();
      await p.stop();
    }
    // j0..j5 went at once; j6 had its lease extended by the timeout and the slack; j7, gone, was never sent.
    expect([...s.extended]).toEqual([['j6', 10_000]]);
    expect(s.sent).not.toContain('j7');
    expect(s.nacked.get('j7')).toMatch(/its lease could not be kept while it waited for a connection: invocation j7 was cancelled/);
  });
});
