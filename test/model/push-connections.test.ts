/**
 * The pusher (core/push.ts) has at most `connections` deliveries waiting for their receiver's
 * headers at once, whatever its target's concurrency: the edge plane's is 6, Cloudflare's bound on
 * a Durable Object's connections waiting for headers, past which a request waits unsent with its
 * lease and timeout running. It claims no job it could not send at once; answers whose headers
 * came (a 202, a body still streaming) hold no connection.
 */
import { describe, expect, it } from 'vitest';
import type { Ack, PushPort } from '../../src/core/push.ts';
import { claimFrom, jobsOf, newPusher } from '../support/pusher.ts';
import { until } from '../support/wait.ts';

/** A plane of `n` jobs whose receiver the test answers: `headers` holds the answers not yet begun. */
function plane(n: number, respond: () => Promise<Response>) {
  const waiting = jobsOf(n);
  // mostOut: the most jobs claimed and not yet answered (their receiver's headers not come).
  const s = { claimed: 0, answered: 0, acked: new Set<string>(), awaiting: 0, mostAwaiting: 0, mostOut: 0 };
  const take = (max: number) => {
    const got = waiting.splice(0, max);
    s.claimed += got.length;
    s.mostOut = Math.max(s.mostOut, s.claimed - s.answered);
    return got;
  };
  const ack = (items: Ack[]) => {
    for (const a of items) s.acked.add(a.c.id);
    return items.map(() => null);
  };
  const port: PushPort = {
    claim: claimFrom(take),
    ackMany: async (items) => ack(items),
    ackAndClaim: async (acks, max) => ({ acks: ack(acks), claimed: take(max) }),
    nack: async () => {
      throw new Error('no job is nacked here');
    },
    deliveryToken: async () => null,
    fetch: async () => {
      s.awaiting++;
      s.mostAwaiting = Math.max(s.mostAwaiting, s.awaiting);
      try {
        return await respond();
      } finally {
        s.awaiting--;
        s.answered++;
      }
    },
  };
  return { port, s };
}

describe('the connections a pusher holds', () => {
  it('waits for at most `connections` receivers at once at a concurrency of 16, and claims no job beyond them', async () => {
    const answers: (() => void)[] = [];
    const { port, s } = plane(30, () => new Promise<Response>((r) => answers.push(() => r(new Response('"ok"')))));
    const p = newPusher(port, { concurrency: 16, connections: 6 });
    p.start();
    try {
      await until(() => answers.length >= 6, 'six receivers holding their answer');
      // The others stay queued: a job claimed now would wait unsent, its lease running.
      await until(() => s.claimed === 6, 'six jobs claimed');
      // Answered one at a time, as they come: each answer's connection goes to the next job.
      while (s.acked.size < 30) {
        await until(() => answers.length > 0 || s.acked.size === 30, 'a receiver holding its answer');
        answers.shift()?.();
      }
    } finally {
      for (const a of answers) a();
      await p.stop();
    }
    expect(s.acked.size).toBe(30);
    expect(s.mostAwaiting).toBe(6);
    expect(s.mostOut).toBe(6);
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
});
