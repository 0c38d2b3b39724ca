/**
 * The pusher (core/push.ts) claims no more while the deliveries on their way hold PUSH_BYTES of
 * envelopes: each holds its jobs' envelopes and their request body until it is answered, and 64
 * deliveries of 1 MiB envelopes (or batches of a 16 MiB claim) would pass an isolate's 128 MB. Run
 * against a plane of its own (a port that hands out jobs as the engine does, at most CLAIM_BYTES
 * a claim) and a receiver that answers only when the test says so.
 */
import { describe, expect, it } from 'vitest';
import { type Ack, PUSH_BYTES, type PushPort } from '../../src/core/push.ts';
import { CLAIM_BYTES } from '../../src/core/sql/claim.ts';
import type { Claimed } from '../../src/core/types.ts';
import { claimFrom, jobsOf, newPusher } from '../support/pusher.ts';
import { until } from '../support/wait.ts';

const SIZE = 900_000;

describe('the pusher and the bytes it has on their way', () => {
  it('claims no more while its deliveries hold PUSH_BYTES of envelopes, and delivers every job once as they are answered', async () => {
    const waiting = jobsOf(60, SIZE);
    const take = (max: number) => {
      const out: Claimed[] = [];
      let bytes = 0;
      while (waiting.length && out.length < max && (out.length === 0 || bytes + SIZE <= CLAIM_BYTES)) {
        out.push(waiting.shift()!);
        bytes += SIZE;
      }
      return out;
    };
    const acked: string[] = [];
    const answers: (() => void)[] = [];
    const out: string[] = [];
    const port: PushPort = {
      claim: claimFrom(take),
      ackMany: async (items: Ack[]) => {
        acked.push(...items.map((a) => a.c.id));
        return items.map(() => null);
      },
      ackAndClaim: async (acks: Ack[], max) => {
        acked.push(...acks.map((a) => a.c.id));
        return { acks: acks.map(() => null), claimed: take(max) };
      },
      nack: async () => {
        throw new Error('no job is nacked here');
      },
      deliveryToken: async () => null,
      fetch: (_url, init) => {
        const body = JSON.parse(String(init.body)) as { id: string };
        out.push(body.id);
        return new Promise<Response>((r) =>
          answers.push(() => r(new Response('"ok"', { status: 200, headers: { 'content-type': 'application/json' } }))),
        );
      },
    };
    const p = newPusher(port, { concurrency: 64, timeoutMs: 60_000, now: Date.now });
    p.start();
    try {
      for (let round = 0; acked.length < 60 && round < 20; round++) {
        // Held back by bytes, or out of jobs: everything claimed has gone out.
        await until(() => (p.held.heldBack || !waiting.length) && answers.length === p.stats().inFlight, 'the pusher at rest');
        if (!waiting.length && !answers.length) break;
        expect(p.held.bytes).toBe(answers.length * SIZE);
        expect(p.held.bytes, `round ${round}`).toBeLessThanOrEqual(PUSH_BYTES + CLAIM_BYTES);
        expect(answers.length).toBeLessThan(60);
        for (const answer of answers.splice(0)) answer();
        await until(() => acked.length + waiting.length + answers.length >= 60 || p.held.bytes < PUSH_BYTES, 'answers taken');
      }
      await until(() => acked.length === 60, 'every job acked');
    } finally {
      for (const answer of answers.splice(0)) answer();
      await p.stop();
    }
    expect([...acked].sort()).toEqual(Array.from({ length: 60 }, (_, i) => `j${i}`).sort());
    expect(new Set(out).size).toBe(60);
  });
});
