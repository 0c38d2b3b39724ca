/**
 * Jobs delivered by a Pusher (core/push.ts) against a plane of its own: a port that hands out the
 * jobs, records the acks and nacks, and answers each nack as the test says; the receiver is the
 * test's `answer`. Model tests of what the pusher makes of its receiver's answers.
 */
import { type Delivered, Pusher, type PushPort } from '../../src/core/push.ts';
import type { Retried } from '../../src/core/push-port.ts';
import type { Claimed } from '../../src/core/types.ts';
import { until } from './wait.ts';

export const NOW = 1_800_000_000_000;
export const RESULT_BYTES = 1 << 20;

export interface Pushed {
  /** Each delivery's line, as the pusher told it. */
  told: Delivered[];
  /** The results jobs were acked with, by job id. */
  acked: Map<string, Uint8Array | null>;
  /** The nacks' `retry`, by job id. */
  nacked: Map<string, boolean>;
}

/** A Pusher of queue q to https://receiver.test/ on `port`: a 1 MiB result limit, a 60 s lease, the clock at NOW unless given. */
export function newPusher(
  port: PushPort,
  o: {
    concurrency: number;
    batchSize?: number;
    timeoutMs?: number;
    connections?: number;
    now?: () => number;
    onDelivered?: (d: Delivered) => void;
  },
): Pusher {
  return new Pusher(
    port,
    {
      url: 'https://receiver.test/',
      concurrency: o.concurrency,
      timeoutMs: o.timeoutMs ?? 5_000,
      batchSize: o.batchSize ?? 1,
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
      now: o.now ?? (() => NOW),
      onDelivered: o.onDelivered,
      connections: o.connections,
    },
  );
}

/** Jobs j0..j<n-1> of queue q, each claimable once, with envelopes of `bytes`. */
export function jobsOf(n: number, bytes = 2): Claimed[] {
  return Array.from({ length: n }, (_, i) => ({
    id: `j${i}`,
    queue: 'q',
    envelope: new Uint8Array(bytes),
    attempt: 1,
    budgetAttempt: 1,
    leaseUntil: NOW + 60_000,
    priority: 0,
  }));
}

/** A port's claim that hands out what `take` gives, else waits until the pusher calls it off. */
export function claimFrom(take: (max: number) => Claimed[]): PushPort['claim'] {
  return async (max, _lease, _wait, signal) => {
    const got = take(max);
    if (got.length) return got;
    await new Promise((r) => signal.addEventListener('abort', r, { once: true }));
    return [];
  };
}

/** Pushes jobs j0..j<n-1> until each is acked or nacked; `answer` gets each request's body. `into`: filled as it goes. */
export async function pushJobs(
  n: number,
  answer: (body: string) => Promise<Response>,
  o: { concurrency?: number; batchSize?: number; retried?: Retried; into?: Pushed } = {},
): Promise<Pushed> {
  const waiting = jobsOf(n);
  const out: Pushed = o.into ?? { told: [], acked: new Map(), nacked: new Map() };
  const port: PushPort = {
    claim: claimFrom((max) => waiting.splice(0, max)),
    ackMany: async (items) => {
      for (const a of items) out.acked.set(a.c.id, a.result);
      return items.map(() => null);
    },
    ackAndClaim: async (acks, max) => {
      for (const a of acks) out.acked.set(a.c.id, a.result);
      return { acks: acks.map(() => null), claimed: waiting.splice(0, max) };
    },
    nack: async (c, _error, retry) => {
      out.nacked.set(c.id, retry);
      return o.retried ?? { state: 'delayed', runAt: NOW + 10_000 };
    },
    deliveryToken: async () => null,
    fetch: (_url, init) => answer(String(init.body)),
  };
  const p = newPusher(port, { concurrency: o.concurrency ?? 1, batchSize: o.batchSize ?? 1, onDelivered: (d) => out.told.push(d) });
  p.start();
  try {
    await until(() => out.acked.size + out.nacked.size >= n && out.told.length >= n, `${n} jobs settled`, 30_000);
  } finally {
    await p.stop();
  }
  return out;
}

export interface Once {
  delivered: Delivered;
  /** What the pusher acked the job with, if it did. */
  acked: Uint8Array | null | undefined;
  /** The nack's `retry`, if it nacked. */
  retry: boolean | undefined;
}

/** One job delivered once. */
export async function deliverOnce(answer: () => Promise<Response>, retried?: Retried): Promise<Once> {
  const r = await pushJobs(1, answer, { retried });
  return { delivered: r.told[0]!, acked: r.acked.get('j0'), retry: r.nacked.get('j0') };
}
