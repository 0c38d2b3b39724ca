/**
 * A nacked delivery's line says what became of its job (docs/contract.md, "Push delivery"): the
 * pusher passes on what its plane's nack answered, and the line (the feed's, `lakeshore push`'s)
 * tells when the job is delivered again, or that it failed. Run against a port that answers each
 * nack as the test says, and a receiver that is down.
 */
import { describe, expect, it } from 'vitest';
import { type Delivered, Pusher, type PushPort } from '../../src/core/push.ts';
import type { Retried } from '../../src/core/push-port.ts';
import { deliveryLine } from '../../src/core/push-wire.ts';
import type { Claimed } from '../../src/core/types.ts';
import { until } from '../support/wait.ts';

const NOW = 1_800_000_000_000;

async function deliverOnce(retried: Retried, answer = async () => new Response('deploying', { status: 503 })): Promise<Delivered> {
  const job: Claimed = {
    id: 'j1',
    queue: 'q',
    envelope: new Uint8Array(2),
    attempt: 1,
    budgetAttempt: 1,
    leaseUntil: NOW + 60_000,
    priority: 0,
  };
  let handed = false;
  const told: Delivered[] = [];
  const port: PushPort = {
    claim: async (_max, _lease, _wait, signal) => {
      if (!handed) {
        handed = true;
        return [job];
      }
      await new Promise((r) => signal.addEventListener('abort', r, { once: true }));
      return [];
    },
    ackMany: async (items) => items.map(() => null),
    ackAndClaim: async () => ({ acks: [], claimed: [] }),
    nack: async () => retried,
    deliveryToken: async () => null,
    fetch: answer,
  };
  const p = new Pusher(
    port,
    {
      url: 'https://receiver.test/',
      concurrency: 1,
      timeoutMs: 5_000,
      batchSize: 1,
      secrets: ['whsec_dGVzdHRlc3R0ZXN0dGVzdHRlc3R0ZXN0dGVzdA=='],
    },
    {
      ns: 'n',
      queue: 'q',
      workerId: 'lakeshore-push',
      leaseMs: 60_000,
      maxLeaseMs: 600_000,
      resultBytes: 1 << 20,
      maxDelayMs: 3_600_000,
      waitMs: 50,
      now: () => NOW,
      onDelivered: (d) => told.push(d),
    },
  );
  p.start();
  try {
    await until(() => told.length > 0, 'the delivery told');
  } finally {
    await p.stop();
  }
  return told[0]!;
}

describe("a nacked delivery's line", () => {
  it('tells when its job is delivered again, or that it failed', async () => {
    const later = await deliverOnce({ state: 'delayed', runAt: NOW + 10_000 });
    expect(later).toMatchObject({ outcome: 'nacked', status: 503, next: { state: 'delayed', inMs: 10_000 } });
    expect(deliveryLine(later).message).toBe(
      'push attempt 1: 503 in 0 ms, nacked: push target answered 503: deploying; delivered again in 10 s',
    );
    expect(deliveryLine(await deliverOnce({ state: 'delayed', runAt: NOW + 360_000 })).message).toMatch(/; delivered again in 6 min$/);
    expect(deliveryLine(await deliverOnce({ state: 'queued', runAt: null })).message).toMatch(/; delivered again at once$/);
    expect(deliveryLine(await deliverOnce({ state: 'failed', runAt: null })).message).toMatch(/: deploying; its job failed$/);
    // workerd's words for a refused connection end in a stop: the line goes on after it without one.
    const lost = await deliverOnce({ state: 'delayed', runAt: NOW + 10_000 }, async () => {
      throw new Error('Network connection lost.');
    });
    expect(deliveryLine(lost).message).toMatch(/: push target could not be reached: Network connection lost; delivered again in 10 s$/);
  });
});
