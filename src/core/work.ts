/**
 * The workers' verbs: claim (waiting for work, handed rows by the next submit), ack, nack,
 * heartbeat, and lease expiry. Each transition is one guarded statement (./sql); what it changed
 * wakes the callers parked on it (park.ts).
 */
import { claimPlan, nextLeasePlan, sweepPlan } from './claims.ts';
import type { Committer } from './committer.ts';
import { ParkedClaim } from './handoff.ts';
import { ACKS_WAIT_MS, type Limits } from './limits.ts';
import type { Parking } from './park.ts';
import { ackInput, claimArgs, holder, nackInput, type AckRequest, type ClaimArgs, type ClaimRequest, type HolderRequest, type NackRequest } from './requests.ts';
import { failed, fill, one, parseEach, type Settled } from './settled.ts';
import { ackPlan, type AckItem, type Finished } from './sql/ack.ts';
import { heartbeatPlan } from './sql/heartbeat.ts';
import { nackPlan } from './sql/nack.ts';
import type { Claimed, HeartbeatAnswer } from './types.ts';
import * as v from './validate.ts';
import { keys } from './waiters.ts';

export type Nacked = { state: 'queued' | 'failed'; absorbed: boolean };

export interface WorkOptions {
  committer: Committer;
  park: Parking;
  limits: Limits;
  now: () => number;
  random: () => number;
  /** Told of every new lease deadline, so a plane can arm a timer (the Durable Object's alarm). */
  onLease?: ((ns: string, queue: string, deadline: number) => void) | undefined;
}

export class Work {
  private readonly committer: Committer;
  private readonly park: Parking;
  private readonly limits: Limits;
  private readonly now: () => number;
  private readonly random: () => number;
  private readonly onLease: WorkOptions['onLease'];
  /** Queues seen marked sampled (their level counts are kept; see claims.ts). */
  private readonly sampled = new Set<string>();

  constructor(o: WorkOptions) {
    this.committer = o.committer;
    this.park = o.park;
    this.limits = o.limits;
    this.now = o.now;
    this.random = o.random;
    this.onLease = o.onLease;
  }

  async claim(ns: string, queue: unknown, req: ClaimRequest): Promise<Claimed | null> {
    const [c] = await this.claimMany(ns, queue, { ...req, max: 1 });
    return c ?? null;
  }

  /** Claims up to `max` invocations; waits (up to waitMs) only while it has none. */
  async claimMany(ns: string, queue: unknown, req: ClaimRequest): Promise<Claimed[]> {
    return this.claimWith(ns, claimArgs(queue, req, this.limits), req.signal);
  }

  /**
   * A worker's acks and its next claim in one request: the acks (each fenced alone, exactly as
   * ackMany) and the claim go to storage in one batch. A claim that carries acks waits at most
   * ACKS_WAIT_MS for work, so their answers are never held back long; a worker that found
   * nothing claims again without acks and waits as long as it likes. Bad claim arguments
   * refuse the whole request before any ack lands.
   */
  async ackAndClaim(ns: string, queue: unknown, acks: AckRequest[], req: ClaimRequest): Promise<{ acks: Settled<{ absorbed: boolean }>[]; claimed: Claimed[] }> {
    const args = claimArgs(queue, req, this.limits);
    v.batch(acks, this.limits);
    if (acks.length) args.wait = Math.min(args.wait, ACKS_WAIT_MS);
    // Both start now (one batch); awaited together, so a failure of either is never left unhandled.
    const [acked, claimed] = await Promise.all([this.ackMany(ns, acks.map((a) => ({ ...a, queue: args.q }))), this.claimWith(ns, args)]);
    return { acks: acked, claimed };
  }

  private async claimWith(ns: string, { q, max, input, wait }: ClaimArgs, signal?: AbortSignal): Promise<Claimed[]> {
    // fifo and filo claims that park can be handed rows by the next submit (see handoff.ts).
    const rides = input.kind !== 'boltzmann' || input.temperature === 0;
    let next: number | null | undefined;
    const got = await this.park.until<Claimed[]>({
      key: keys.queue(ns, q), deadline: this.now() + wait, signal,
      look: async () => {
        const ctx = { now: this.now(), ns, queue: q, limits: this.limits, random: this.random, sampled: this.sampled };
        const out = await this.committer.run(claimPlan(ctx, input, max, wait > 0));
        this.park.expired(ns, q, out.expired);
        next = out.nextLease;
        return out.claimed.length ? out.claimed : undefined;
      },
      // Park until a transition wakes us, or until the queue's next lease runs out: then this
      // claim expires it itself, whether or not any alarm or other process is still there.
      nap: async (left) => {
        if (next === undefined) next = await this.committer.run(nextLeasePlan(ns, q));
        return Math.min(left, next === null ? Infinity : next - this.now() + 1);
      },
      rider: rides ? () => new ParkedClaim(ns, q, { ...input, kind: input.kind === 'filo' ? 'filo' : 'fifo' }, max, this.limits.defaultLeaseMs) : undefined,
      gaveUp: async () => [],
    });
    if (got.length) this.onLease?.(ns, q, Math.max(...got.map((c) => c.leaseUntil)));
    return got;
  }

  async ack(ns: string, id: unknown, req: HolderRequest & { result?: unknown }): Promise<{ absorbed: boolean }> {
    return one(await this.acked(ns, [ackInput({ ...req, id }, this.limits)]));
  }

  /** Acks many in few guarded UPDATEs; each item is fenced on its own, and a stale item fails alone. */
  async ackMany(ns: string, items: AckRequest[]): Promise<Settled<{ absorbed: boolean }>[]> {
    const { out, valid, at } = parseEach(v.batch(items, this.limits), (it) => ackInput(it, this.limits));
    return fill(out, at, valid.length ? await this.acked(ns, valid) : []);
  }

  private async acked(ns: string, items: AckItem[]): Promise<({ absorbed: boolean } | Error)[]> {
    const answers = await this.committer.run(ackPlan(this.now(), ns, items));
    answers.forEach((r, k) => !(r instanceof Error) && !r.absorbed && this.park.finished(ns, items[k]!.id));
    return answers.map((r) => (r instanceof Error ? r : { absorbed: r.absorbed }));
  }

  async nack(ns: string, id: unknown, req: NackRequest): Promise<Nacked> {
    const invId = v.id(id, this.limits);
    const n = nackInput(req, this.limits);
    const plan = nackPlan(this.now(), ns, invId, req.queue ?? null, n.holder, n.error, n.retry, this.limits.defaultMaxAttempts);
    // A retry queues the row again: claims parked on its queue ride along when the caller named it.
    const fed = n.retry ? (req.queue ?? null) : null;
    const requeues = (out: Finished) => (!out.absorbed && out.state === 'queued' ? 1 : 0);
    const out = fed ? await this.park.feed(ns, fed, plan, 1, requeues) : await this.committer.run(plan);
    if (!out.absorbed) {
      if (out.state !== 'queued') this.park.finished(ns, invId);
      else if (!fed) this.park.wake(keys.queue(ns, out.queue), 1); // feed() has woken the queue already
      this.park.wake(keys.journal(ns, invId));
    }
    return { state: out.state === 'queued' ? 'queued' : 'failed', absorbed: out.absorbed };
  }

  /** Nacks many; each item is fenced on its own, and a stale item fails alone. */
  async nackMany(ns: string, items: (NackRequest & { id: unknown })[]): Promise<Settled<Nacked>[]> {
    return Promise.all(v.batch(items, this.limits).map((it) => this.nack(ns, it.id, it).then((value) => ({ ok: true as const, value }), failed)));
  }

  async heartbeat(ns: string, id: unknown, req: HolderRequest & { leaseMs?: unknown }): Promise<HeartbeatAnswer> {
    const plan = heartbeatPlan(this.now(), ns, v.id(id, this.limits), req.queue ?? null, holder(req), v.leaseMs(req.leaseMs, this.limits), this.limits.defaultLeaseMs);
    const out = await this.committer.run(plan);
    if (out.leaseUntil !== null && req.queue) this.onLease?.(ns, req.queue, out.leaseUntil);
    return out;
  }

  /** Returns expired running rows of a queue to queued (or failed); answers the next deadline. */
  async expire(ns: string, queue: string): Promise<number | null> {
    const out = await this.committer.run(sweepPlan(this.now(), ns, queue, this.limits));
    this.park.expired(ns, queue, out.expired);
    return out.next;
  }
}
