/**
 * Push delivery on a local plane (docs/contract.md, "Push delivery"): the edge plane's queue
 * objects push by themselves; a local plane is a file, with no process of its own, so `lakeshore
 * push` (or `startPushing` here) is the process that pushes from it. It runs the same Pusher
 * (src/core/push.ts) through the Dispatch's verbs, for each queue of the namespace that has a push
 * target, and follows their settings as any process changes them (it looks again every second).
 * The file may be a Python program's: both planes share one format.
 *
 * One difference, because a local plane has no HTTP face: a delivery carries no delivery token
 * (`delivery_token: null`), so a receiver answers with the outcome (2xx, or an error status);
 * a 202 leaves the job running until its lease runs out, and then it is delivered again.
 */
import { PUSH_WORKER_ID, Pusher, type Delivered, type PushStats } from '../../src/core/push.ts';
import { deliveryLine } from '../../src/core/push-wire.ts';
import type { PushTarget } from '../../src/core/push-target.ts';
import type { Dispatch } from './dispatch.ts';

export interface PushingOptions {
  /** The queues to push from; default: every queue of the namespace with a push target, looked for again each second. */
  queues?: string[];
  /** Told of each delivery's outcome. */
  onDelivered?: (queue: string, d: Delivered) => void;
  /** How often the targets are read again (ms; default 1,000). */
  everyMs?: number;
}

export interface Pushing {
  /** Stops claiming; resolves once deliveries on their way are settled. */
  stop(): Promise<void>;
  /** Each pushing queue's figures. */
  stats(): Record<string, PushStats>;
}

const same = (a: PushTarget, b: PushTarget) =>
  a.url === b.url &&
  a.concurrency === b.concurrency &&
  a.timeoutMs === b.timeoutMs &&
  a.batchSize === b.batchSize &&
  a.secrets.join() === b.secrets.join();

/** Pushes the jobs of the dispatch's push queues until stopped. */
export function startPushing(d: Dispatch, opts: PushingOptions = {}): Pushing {
  const pushers = new Map<string, { pusher: Pusher; target: PushTarget }>();
  let stopped = false;
  let timer: ReturnType<typeof setTimeout> | undefined;
  let wake: () => void = () => {};

  const pusherFor = (queue: string, target: PushTarget, limits: Awaited<ReturnType<Dispatch['pushTarget']>>['limits']) =>
    new Pusher(
      {
        claim: (max, leaseMs, waitMs, signal) => d.claimMany(queue, PUSH_WORKER_ID, max, { leaseMs, waitMs, signal }),
        ackAndClaim: (acks, max, leaseMs, waitMs) =>
          d.ackAndClaim(
            queue,
            PUSH_WORKER_ID,
            acks.map(({ c, result }) => ({ id: c.id, attempt: c.attempt, result })),
            max,
            { leaseMs, waitMs },
          ),
        // The dispatch's acks are batched already (one write for those made together).
        ackMany: (items) =>
          Promise.all(
            items.map(({ c, result }) =>
              d.ack(c.id, PUSH_WORKER_ID, { attempt: c.attempt, result }).then(
                () => null,
                (e: unknown) => (e instanceof Error ? e : new Error(String(e))),
              ),
            ),
          ),
        nack: async (c, error, retry, delayMs) => {
          const state = await d.nack(c.id, PUSH_WORKER_ID, { attempt: c.attempt, error, retry, delayMs: delayMs ?? undefined });
          // When it comes due, for the delivery's line: a read of the row (a nack of a local plane answers its state alone).
          const runAt = state === 'delayed' ? ((await d.get(c.id).catch(() => null))?.runAt ?? null) : null;
          return { state, runAt };
        },
        deliveryToken: async () => null,
        fetch: (url, init) => fetch(url, init),
      },
      target,
      {
        ns: d.namespace,
        queue,
        workerId: PUSH_WORKER_ID,
        leaseMs: limits.defaultLeaseMs,
        maxLeaseMs: limits.maxLeaseMs,
        resultBytes: limits.resultBytes,
        maxDelayMs: limits.maxDelayMs,
        maxClaim: limits.maxBatch,
        // A local claim waits in this process: short waits, so settings changes and stop() are seen soon.
        waitMs: 1_000,
        onDelivered: (x) => {
          // The feed tells each delivery's outcome, as the edge plane's does (every process on the file reads it).
          void d.workerLog(queue, PUSH_WORKER_ID, [deliveryLine(x)]).catch(() => {});
          opts.onDelivered?.(queue, x);
        },
      },
    );

  const look = async () => {
    const queues = opts.queues ?? (await d.listQueues());
    for (const q of queues) {
      const { target, limits } = await d.pushTarget(q);
      const had = pushers.get(q);
      if (!target) {
        if (had) {
          pushers.delete(q);
          d.pushingFrom(q, null);
          await had.pusher.stop();
        }
        continue;
      }
      if (!had) {
        const pusher = pusherFor(q, target, limits);
        pushers.set(q, { pusher, target });
        d.pushingFrom(q, pusher);
        pusher.start();
      } else if (!same(had.target, target)) {
        had.target = target;
        had.pusher.retarget(target);
      }
    }
  };

  const loop = async () => {
    while (!stopped) {
      try {
        await look();
      } catch {
        /* the file is busy or away a moment: look again */
      }
      await new Promise<void>((r) => {
        wake = r;
        timer = setTimeout(r, opts.everyMs ?? 1_000);
      });
    }
  };
  const running = loop();

  return {
    async stop() {
      stopped = true;
      clearTimeout(timer);
      wake();
      await running;
      await Promise.all([...pushers.values()].map((p) => p.pusher.stop()));
      for (const q of pushers.keys()) d.pushingFrom(q, null);
    },
    stats: () => Object.fromEntries([...pushers].map(([q, p]) => [q, p.pusher.stats()])),
  };
}
