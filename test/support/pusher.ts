/**
 * One job delivered once by a Pusher (core/push.ts) against a plane of its own: a port that hands
 * out the job, acks what it is told to, and answers each nack as the test says; the receiver is
 * the test's `answer`. Model tests of what the pusher makes of an answer.
 */
import { type Delivered, Pusher, type PushPort } from '../../src/core/push.ts';
import type { Retried } from '../../src/core/push-port.ts';
import type { Claimed } from '../../src/core/types.ts';
import { until } from './wait.ts';

export const NOW = 1_800_000_000_000;
export const RESULT_BYTES = 1 << 20;

export interface Once {
  delivered: Delivered;
  /** What the pusher acked the job with, if it did. */
  acked: Uint8Array | null | undefined;
  /** The nack's `retry`, if it nacked. */
  retry: boolean | undefined;
}

export async function deliverOnce(
  answer: () => Promise<Response>,
  retried: Retried = { state: 'delayed', runAt: NOW + 10_000 },
): Promise<Once> {
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
  const out: Omit<Once, 'delivered'> = { acked: undefined, retry: undefined };
  const port: PushPort = {
    claim: async (_max, _lease, _wait, signal) => {
      if (!handed) {
        handed = true;
        return [job];
      }
      await new Promise((r) => signal.addEventListener('abort', r, { once: true }));
      return [];
    },
    ackMany: async (items) => {
      for (const a of items) out.acked = a.result;
      return items.map(() => null);
    },
    ackAndClaim: async (acks) => {
      for (const a of acks) out.acked = a.result;
      return { acks: acks.map(() => null), claimed: [] };
    },
    nack: async (_c, _error, retry) => {
      out.retry = retry;
      return retried;
    },
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
      resultBytes: RESULT_BYTES,
      maxDelayMs: 3_600_000,
      waitMs: 50,
      now: () => NOW,
      onDelivered: (d) => told.push(d),
    },
  );
  p.start();
  try {
    await until(() => told.length > 0 && (out.acked !== undefined || out.retry !== undefined), 'the delivery told');
  } finally {
    await p.stop();
  }
  return { delivered: told[0]!, ...out };
}
