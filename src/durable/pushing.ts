/**
 * A queue object's push delivery (core/push.ts): while its queue has a push target, a Pusher runs
 * in the object on its engine, claiming as the worker `lakeshore-push` and POSTing each job. It
 * starts when the object does (a submit, a due alarm, a request), and follows settings changes. An
 * object evicted meanwhile loses nothing: every job that becomes claimable either comes through the
 * object (a submit, a nack, a retry, a redrive) or arms its alarm (a delay, a lease running out), and
 * each of those starts the object and so its pusher again. While it has work on its way, its alarm
 * keeps it from being evicted (KEEP_AWAKE_MS).
 */
import type { Engine } from '../core/engine.ts';
import { PUSH_WORKER_ID, Pusher, type PushStats } from '../core/push.ts';
import { deliveryLine } from '../core/push-wire.ts';
import { mintDeliveryToken, DELIVERY_TOKEN_TTL_MS } from '../core/delivery-token.ts';
import { serviceOf } from '../core/push-target.ts';
import { type Key, signingKeys } from '../core/signing.ts';
import type { LogLine } from '../core/feed.ts';
import { errorOf } from '../core/settled.ts';

export interface PushingOptions {
  engine: Engine;
  env: Env;
  ns: string;
  queue: string;
  /** The worker book hears of the pusher as of any worker. */
  heard: (workerId: string, concurrency: number) => void;
  /** A delivery's outcome, as a log line of the feed. */
  log: (workerId: string, lines: LogLine[]) => void;
  /** Deliveries begin: the object's alarm is to fire within KEEP_AWAKE_MS (see awake()). */
  keepAwake: () => void;
  /**
   * Before each claim, as before a request: while a move fences the object, whether the move has
   * ended (shard-place.ts `asked`). A pusher retries its claims through a fence, and may be all
   * that works on the queue.
   */
  asked: () => Promise<void>;
}

/**
 * How often a queue object's alarm fires while it pushes. Cloudflare evicts an object that has
 * had no request or alarm for 70-140 s, and before the compatibility date 2026-10-01 a fetch on
 * its way does not count: a delivery whose receiver takes longer than that (push.timeout_ms may be
 * 15 min) would be cut off, its answer lost and the job delivered again. So would a pusher waiting
 * for its queue's claim rate, its jobs left queued until the next submit. An alarm is an event:
 * each one keeps the object another while.
 */
export const KEEP_AWAKE_MS = 30_000;

/**
 * Deliveries of a queue waiting for their receiver's headers at once: Cloudflare lets a Worker or
 * a Durable Object have 6 connections waiting for headers, and holds a seventh unsent until one
 * answers, its timeout running, to be failed as unanswered though its receiver never saw it. Past
 * 6 the pusher holds the delivery itself: its timeout starts when it is sent, and its jobs' leases
 * are extended if the wait ate into them. A receiver that answers at once (202, or a 200 from a
 * fast function) holds a connection for a moment; one that works before answering, for its work.
 */
export const PUSH_CONNECTIONS = 6;

export class Pushing {
  private pusher: Pusher | null = null;
  private readonly o: PushingOptions;

  constructor(o: PushingOptions) {
    this.o = o;
  }

  /** Reads the queue's push target and starts, retargets or stops the pusher to match. */
  async refresh(): Promise<void> {
    const { engine, ns, queue } = this.o;
    const target = await engine.admin.pushTarget(ns, queue);
    if (!target) {
      const p = this.pusher;
      this.pusher = null;
      await p?.stop();
      return;
    }
    this.o.heard(PUSH_WORKER_ID, target.concurrency);
    if (this.pusher) {
      this.pusher.retarget(target);
      this.pusher.start();
      return;
    }
    const limits = engine.limits;
    const settings = (await engine.admin.info(ns, queue)).settings;
    // The signing keys once, not a job: a deployment's vars do not change under a running object.
    let keys: Promise<Key[]> | null = null;
    const keysOf = () =>
      (keys ??= signingKeys(this.o.env as unknown as Record<string, string | undefined>).catch((e: unknown) => {
        keys = null;
        throw e;
      }));
    this.pusher = new Pusher(
      {
        claim: async (max, leaseMs, waitMs, signal) => {
          await this.o.asked();
          return engine.work.claimMany(ns, queue, { workerId: PUSH_WORKER_ID, max, leaseMs, waitMs, signal });
        },
        ackAndClaim: async (acks, max, leaseMs, waitMs) => {
          await this.o.asked();
          const out = await engine.work.ackAndClaim(
            ns,
            queue,
            acks.map(({ c, result }) => ({ id: c.id, workerId: PUSH_WORKER_ID, attempt: c.attempt, result, queue })),
            { workerId: PUSH_WORKER_ID, max, leaseMs, waitMs },
          );
          return { acks: out.acks.map((r) => (r.ok ? null : errorOf(r.error))), claimed: out.claimed };
        },
        ackMany: async (items) =>
          (
            await engine.work.ackMany(
              ns,
              items.map(({ c, result }) => ({ id: c.id, workerId: PUSH_WORKER_ID, attempt: c.attempt, result, queue })),
            )
          ).map((r) => (r.ok ? null : errorOf(r.error))),
        nack: async (c, error, retry, delayMs) => {
          const out = await engine.work.nack(ns, c.id, { workerId: PUSH_WORKER_ID, attempt: c.attempt, error, retry, delayMs, queue });
          return { state: out.state, runAt: out.runAt };
        },
        extend: async (c, leaseMs) => {
          const out = await engine.work.heartbeat(ns, c.id, { workerId: PUSH_WORKER_ID, attempt: c.attempt, leaseMs, queue });
          if (out.cancelled || out.leaseUntil === null) throw new Error(`job ${c.id} is no longer held: it was cancelled`);
          return out.leaseUntil;
        },
        deliveryToken: async (c) =>
          mintDeliveryToken(await keysOf(), {
            ns,
            queue,
            id: c.id,
            attempt: c.attempt,
            workerId: PUSH_WORKER_ID,
            exp: Date.now() + DELIVERY_TOKEN_TTL_MS,
          }),
        fetch: (url, init) => {
          // service://BINDING/path: the Worker behind the binding (PUSH_SERVICES), never the internet.
          const s = serviceOf(url);
          if (!s) return fetch(url, init);
          const bound = (this.o.env as unknown as Record<string, Fetcher | undefined>)[s.binding];
          if (typeof bound?.fetch !== 'function') throw new Error(`this plane has no service binding ${s.binding}`);
          return bound.fetch(new Request(`https://${s.binding}${s.path}`, init));
        },
      },
      target,
      {
        ns,
        queue,
        workerId: PUSH_WORKER_ID,
        leaseMs: settings.leaseMs ?? limits.defaultLeaseMs,
        maxLeaseMs: limits.maxLeaseMs,
        resultBytes: limits.resultBytes,
        maxDelayMs: limits.maxDelayMs,
        maxClaim: limits.maxBatch,
        connections: PUSH_CONNECTIONS,
        onDelivered: (d) => this.o.log(PUSH_WORKER_ID, [deliveryLine(d)]),
        onDelivering: () => this.o.keepAwake(),
      },
    );
    this.pusher.start();
  }

  /**
   * Whether the object is to stay awake (its alarm again within KEEP_AWAKE_MS): a delivery is on
   * its way, or jobs wait for the claim rate (`rated`: the queue has one). Idle, it may be evicted:
   * a submit, a due job or its alarm starts it, and its pusher, again.
   */
  async awake(rated: boolean): Promise<boolean> {
    const p = this.pusher;
    if (!p?.active) return false;
    if (p.delivering) return true;
    if (!rated) return false;
    const { engine, ns, queue } = this.o;
    if ((await engine.admin.info(ns, queue)).paused) return false;
    return (await engine.count(ns, queue, 'queued')) > 0;
  }

  stats(): PushStats | null {
    return this.pusher?.stats() ?? null;
  }
}
