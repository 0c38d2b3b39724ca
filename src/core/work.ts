/**
 * The workers' verbs: claim (waiting for work, handed rows by the next submit), ack, nack,
 * heartbeat, and lease expiry. Each transition is one guarded statement (./sql); what it changed
 * wakes the callers parked on it (park.ts).
 */
import { claimPlan, plain, sweepPlan, wakePlan } from './claims.ts';
import type { Wake } from './sql/wake.ts';
import type { HintBook } from './hints.ts';
import type { Moved } from './sql/expire.ts';
import type { Committer } from './committer.ts';
import { ParkedClaim } from './handoff.ts';
import { ACKS_WAIT_MS, GATHER_MS, type Limits } from './limits.ts';
import type { Parking } from './park.ts';
import {
  ackInput,
  claimArgs,
  holder,
  nackInput,
  type AckRequest,
  type ClaimArgs,
  type ClaimRequest,
  type HolderRequest,
  type NackRequest,
  storedBackoff,
} from './requests.ts';
import { PUSH_BACKOFF, PUSH_WORKER_ID } from './push-port.ts';
import { failed, fill, one, parseEach, type Settled } from './settled.ts';
import { ackPlan, type AckItem, type Finished } from './sql/ack.ts';
import { heartbeatPlan } from './sql/heartbeat.ts';
import { nackPlan } from './sql/nack.ts';
import { releasePlan, type Handed } from './sql/release.ts';
import { withinClaimBytes } from './sql/claim.ts';
import { type KnownWorkers, workerKey } from './sql/workers.ts';
import type { Claimed, HeartbeatAnswer } from './types.ts';
import * as v from './validate.ts';
import { keys } from './waiters.ts';

const PUSH_BACKOFF_STORED = storedBackoff(PUSH_BACKOFF);

/** A nack's outcome; `runAt`: when a delayed job comes due (its backoff's end), else null. */
export type Nacked = { state: 'queued' | 'delayed' | 'failed'; absorbed: boolean; runAt: number | null };

export interface WorkOptions {
  committer: Committer;
  park: Parking;
  limits: Limits;
  now: () => number;
  random: () => number;
  /** Told of every moment a queue must be looked at again (a lease deadline, a delayed row due), so a plane can arm a timer (the Durable Object's alarm). */
  onWake?: ((ns: string, queue: string, at: number) => void) | undefined;
  /** Told when a job of `queue` failed for good (its queue may have a dead-letter queue to wake). */
  onFailed?: ((ns: string, queue: string) => void) | undefined;
  /** A single writer's hints (hints.ts): claims leave out what cannot do anything. */
  hints?: HintBook | undefined;
}

export class Work {
  private readonly committer: Committer;
  private readonly park: Parking;
  private readonly limits: Limits;
  private readonly now: () => number;
  private readonly random: () => number;
  private readonly onWake: WorkOptions['onWake'];
  private readonly onFailed: WorkOptions['onFailed'];
  private readonly hints: HintBook | undefined;
  /** Queues seen marked sampled (their level counts are kept; see claims.ts). */
  private readonly sampled = new Set<string>();
  /** Workers seen registered, and their numbers (sql/workers.ts): their claims register them no more, their acks name them by number. */
  private readonly workers: KnownWorkers = new Map();

  constructor(o: WorkOptions) {
    this.committer = o.committer;
    this.park = o.park;
    this.limits = o.limits;
    this.now = o.now;
    this.random = o.random;
    this.onWake = o.onWake;
    this.onFailed = o.onFailed;
    this.hints = o.hints;
  }

  async claim(ns: string, queue: unknown, req: ClaimRequest): Promise<Claimed | null> {
    const [c] = await this.claimMany(ns, queue, { ...req, max: 1 });
    return c ?? null;
  }

  /** Claims up to `max` invocations; waits (up to waitMs) only while it has none. */
  async claimMany(ns: string, queue: unknown, req: ClaimRequest): Promise<Claimed[]> {
    return this.claimWith(ns, claimArgs(queue, req, this.limits), req.signal, req.onPark);
  }

  /**
   * A worker's acks and its next claim in one request: the acks (each fenced alone, exactly as
   * ackMany) and the claim go to storage in one batch. A claim that carries acks waits at most
   * ACKS_WAIT_MS for work, so their answers are never held back long; a worker that found
   * nothing claims again without acks and waits as long as it likes. Bad claim arguments
   * refuse the whole request before any ack lands.
   */
  async ackAndClaim(
    ns: string,
    queue: unknown,
    acks: AckRequest[],
    req: ClaimRequest,
  ): Promise<{ acks: Settled<{ absorbed: boolean }>[]; claimed: Claimed[] }> {
    const args = claimArgs(queue, req, this.limits);
    v.batch(acks, this.limits);
    if (acks.length) args.wait = Math.min(args.wait, ACKS_WAIT_MS);
    // Where the worker keeps up with a stream of submits (park.ts keepsUp), its claim parks for a
    // moment first and its acks wait with it: the next submit's batch then carries the acks, the
    // insert and the claim (handed its rows), one batch a round instead of two. If none comes in
    // GATHER_MS, the claim looks and the acks go with that look. Otherwise both start now, in one
    // batch. Either way the answer comes after both. Awaited together, so a failure of either is
    // never left unhandled.
    const gather = acks.length > 0 && this.gathers(ns, args) ? GATHER_MS : 0;
    const items = acks.map((a) => ({ ...a, queue: args.q }));
    const [acked, claimed] = await Promise.all([
      this.ackMany(ns, items, gather ? gather + ACKS_WAIT_MS : 0),
      this.claimWith(ns, args, undefined, undefined, gather),
    ]);
    return { acks: acked, claimed };
  }

  /** A claim that a submit can hand rows to, on a queue kept up with and with nothing to sweep or settle first. */
  private gathers(ns: string, { q, input, wait }: ClaimArgs): boolean {
    if (wait <= GATHER_MS || (input.kind === 'boltzmann' && input.temperature !== 0)) return false;
    const h = this.hints?.get(ns, q);
    if (!plain(h)) return false;
    const now = this.now();
    if ([h.lease, h.due, h.ttl].some((at) => at !== null && at <= now + GATHER_MS)) return false;
    return this.park.keepsUp(keys.queue(ns, q), GATHER_MS);
  }

  /**
   * How long a claim may park before its first look (0: it looks now): a single writer's plain
   * queue that rests (park.ts) and has no lease, delayed row or TTL due before then.
   */
  private resting(ns: string, q: string, wait: number): number {
    if (wait <= 0 || !this.hints) return 0;
    const h = this.hints.get(ns, q);
    if (!plain(h) || !this.park.rests(keys.queue(ns, q))) return 0;
    const left = Math.min(h.lease ?? Infinity, h.due ?? Infinity, h.ttl ?? Infinity) - this.now();
    return left > 0 ? Math.min(wait, left + 1) : 0;
  }

  /** `parkFirstMs`: parks that long before its first look (see ackAndClaim). */
  private async claimWith(
    ns: string,
    { q, max, input, wait }: ClaimArgs,
    signal?: AbortSignal,
    onPark?: () => void,
    parkFirstMs = 0,
  ): Promise<Claimed[]> {
    // fifo and filo claims that park can be handed rows by the next submit (see handoff.ts).
    const rides = input.kind !== 'boltzmann' || input.temperature === 0;
    // A claim on a queue that has rested since its last look came back short (a worker's claim
    // right after its acks' claim found nothing) parks first, and looks only when woken, or when
    // its hints say a lease runs out or a row comes due: a look now would find nothing, and cost
    // D1 a query.
    const rest = rides && parkFirstMs === 0 ? this.resting(ns, q, wait) : 0;
    if (rest > 0) {
      parkFirstMs = rest;
      onPark?.();
      onPark = undefined;
    }
    let wake: Wake | undefined;
    const got = await this.park.until<Claimed[]>({
      // A claim held back by the running cap waits for a running job to end, not for new work.
      key: () => (wake?.capped ? keys.capped(ns, q) : keys.queue(ns, q)),
      deadline: this.now() + wait,
      signal,
      parkFirstMs,
      look: async () => {
        const ctx = {
          now: this.now(),
          ns,
          queue: q,
          limits: this.limits,
          random: this.random,
          sampled: this.sampled,
          workers: this.workers,
        };
        const since = this.hints?.mark ?? 0;
        const mark = this.park.mark(keys.queue(ns, q));
        const out = await this.committer.run(
          claimPlan(ctx, input, max, wait > 0, this.hints ? (this.hints.get(ns, q) ?? null) : undefined),
        );
        this.moved(ns, q, out.moved);
        wake = out.wake;
        if (wake) this.hints?.learn(ns, q, wake, since);
        this.park.claimed(keys.queue(ns, q), out.claimed.length < max, mark);
        return out.claimed.length ? out.claimed : undefined;
      },
      // Park until a transition wakes us, or until the queue's next lease runs out or its next
      // delayed job comes due (then this claim expires or promotes it itself, whether or not any
      // alarm or other process is still there), or the claim rate has a token again.
      nap: async (left) => {
        onPark?.();
        onPark = undefined;
        const h = wake ? undefined : this.hints?.get(ns, q);
        // A queue with no pause, cap or rate: its hints say when a lease runs out or a row comes due.
        if (plain(h)) return Math.min(left, Math.min(h.lease ?? Infinity, h.due ?? Infinity) - this.now() + 1);
        wake ??= await this.committer.run(wakePlan(this.now(), ns, q));
        const until = wake.paused ? Infinity : Math.min(wake.lease ?? Infinity, wake.due ?? Infinity, wake.tokenAt ?? Infinity);
        return Math.min(left, until - this.now() + 1);
      },
      rider: rides
        ? () =>
            new ParkedClaim(
              ns,
              q,
              { ...input, kind: input.kind === 'filo' ? 'filo' : 'fifo' },
              max,
              this.limits.defaultLeaseMs,
              () => this.hints?.get(ns, q),
              this.workers,
            )
        : undefined,
      gaveUp: async () => [],
    });
    // One claim hands out at most CLAIM_BYTES of envelopes; what it took beyond goes straight back.
    const [kept, over] = withinClaimBytes(got);
    if (over.length)
      await this.release(
        ns,
        q,
        input.workerId,
        over.map((c) => ({ id: c.id, attempt: c.attempt })),
      );
    if (kept.length) {
      this.park.events.told(
        ns,
        q,
        kept.map((c) => ({ id: c.id, status: 'running', attempt: c.attempt, workerId: input.workerId, envelope: c.envelope })),
      );
      this.hints?.sooner(ns, q, 'lease', Math.min(...kept.map((c) => c.leaseUntil)));
      this.onWake?.(ns, q, Math.max(...kept.map((c) => c.leaseUntil)));
    }
    return kept;
  }

  /**
   * Puts back claims whose answer never reached their worker (its connection was gone): each row
   * still running under that worker and attempt is queued again, its attempt not charged. Answers
   * the ids put back; parked claims of the queue wake for them.
   */
  async release(ns: string, queue: string, workerId: string, items: Handed[]): Promise<string[]> {
    if (!items.length) return [];
    const back = await this.committer.run(releasePlan(this.now(), ns, queue, workerId, items));
    this.park.events.told(
      ns,
      queue,
      back.map((id) => ({ id, status: 'queued' })),
    );
    if (back.length) {
      this.park.wake(keys.capped(ns, queue), back.length);
      this.park.wake(keys.queue(ns, queue), back.length);
    }
    return back;
  }

  /**
   * A worker gives back jobs it claimed and never started (it is stopping, say): each still running
   * under that worker and attempt goes back to its queue as `release` puts it, its attempt not
   * charged. Answers the ids put back; a job no longer the worker's (acked, expired, another's) is
   * left as it is. Fenced as a nack is: by the worker, and by the attempt where an item names one.
   */
  async giveBack(ns: string, queue: unknown, workerId: unknown, items: { id: unknown; attempt?: unknown }[]): Promise<string[]> {
    const q = v.queue(queue, this.limits);
    const w = v.workerId(workerId);
    const handed = v.batch(items, this.limits).map((it) => ({ id: v.id(it.id, this.limits), attempt: v.attempt(it.attempt) }));
    return this.release(ns, q, w, handed);
  }

  async ack(ns: string, id: unknown, req: HolderRequest & { result?: unknown }): Promise<{ absorbed: boolean }> {
    return one(await this.acked(ns, [ackInput({ ...req, id }, this.limits)]));
  }

  /**
   * Acks many in few guarded UPDATEs; each item is fenced on its own, and a stale item fails alone.
   * `patientMs`: the acks may wait that long for another plan's batch (committer.ts).
   */
  async ackMany(ns: string, items: AckRequest[], patientMs = 0): Promise<Settled<{ absorbed: boolean }>[]> {
    const { out, valid, at } = parseEach(v.batch(items, this.limits), (it) => ackInput(it, this.limits));
    return fill(out, at, valid.length ? await this.acked(ns, valid, patientMs) : []);
  }

  private async acked(ns: string, items: AckItem[], patientMs = 0): Promise<({ absorbed: boolean } | Error)[]> {
    // A worker's number, once a claim of it told it, spares a set's guard looking the name up for each item.
    const numbered = items.map((it) => ({
      ...it,
      holder: { ...it.holder, workerNo: this.workers.get(workerKey(ns, it.holder.workerId)) ?? null },
    }));
    const answers = await this.committer.run(ackPlan(this.now(), ns, numbered), { patientMs });
    answers.forEach((r, k) => {
      if (r instanceof Error || r.absorbed) return;
      const it = items[k]!;
      this.park.events.told(ns, r.queue, [{ id: it.id, status: 'succeeded', attempt: it.holder.attempt, workerId: it.holder.workerId }]);
      this.park.ended(ns, r.queue, it.id);
    });
    return answers.map((r) => (r instanceof Error ? r : { absorbed: r.absorbed }));
  }

  async nack(ns: string, id: unknown, req: NackRequest): Promise<Nacked> {
    const invId = v.id(id, this.limits);
    const n = nackInput(req, this.limits);
    // The budget: the job's, else its queue's, else the nacking worker's, else the plane's default.
    const fallback = n.maxAttempts ?? this.limits.defaultMaxAttempts;
    // The pusher's nacks (and its receivers') wait the push backoff where the queue sets none.
    const backoff = n.holder.workerId === PUSH_WORKER_ID ? PUSH_BACKOFF_STORED : null;
    const plan = nackPlan(this.now(), ns, invId, req.queue ?? null, n.holder, n.error, n.retry, fallback, n.delayMs, backoff);
    // A retry queues the row again: claims parked on its queue ride along when the caller named it.
    const fed = n.retry ? (req.queue ?? null) : null;
    const requeues = (out: Finished) => (!out.absorbed && out.state === 'queued' ? 1 : 0);
    const out = fed ? await this.park.feed(ns, fed, plan, 1, requeues) : await this.committer.run(plan);
    if (!out.absorbed) {
      const failed = out.state === 'failed';
      this.park.events.told(ns, out.queue, [
        {
          id: invId,
          status: failed ? 'failed' : 'retrying',
          attempt: n.holder.attempt,
          workerId: n.holder.workerId,
          error: failed ? n.error : null,
        },
      ]);
      this.park.wake(keys.capped(ns, out.queue), 1); // a running job ended
      if (out.state === 'failed') {
        this.park.finished(ns, invId);
        this.park.onFinish?.(ns, out.queue);
        this.onFailed?.(ns, out.queue);
      } else if (out.state === 'queued' && !fed) this.park.wake(keys.queue(ns, out.queue), 1); // feed() has woken the queue already
      if (out.runAt !== null) {
        this.hints?.sooner(ns, out.queue, 'due', out.runAt);
        this.onWake?.(ns, out.queue, out.runAt);
      }
      this.park.wake(keys.journal(ns, invId));
    }
    return { state: out.state === 'succeeded' ? 'failed' : out.state, absorbed: out.absorbed, runAt: out.runAt };
  }

  /** Nacks many; each item is fenced on its own, and a stale item fails alone. */
  async nackMany(ns: string, items: (NackRequest & { id: unknown })[]): Promise<Settled<Nacked>[]> {
    return Promise.all(
      v.batch(items, this.limits).map((it) => this.nack(ns, it.id, it).then((value) => ({ ok: true as const, value }), failed)),
    );
  }

  async heartbeat(ns: string, id: unknown, req: HolderRequest & { leaseMs?: unknown }): Promise<HeartbeatAnswer> {
    const plan = heartbeatPlan(
      this.now(),
      ns,
      v.id(id, this.limits),
      req.queue ?? null,
      holder(req),
      v.leaseMs(req.leaseMs, this.limits),
      this.limits.defaultLeaseMs,
    );
    const out = await this.committer.run(plan);
    if (out.leaseUntil !== null && req.queue) this.onWake?.(ns, req.queue, out.leaseUntil);
    return out;
  }

  /**
   * The queue's sweep (the alarm's work, and any claim's): expired leases back to waiting or
   * failed, due delayed rows to queued, rows past their TTL failed. Answers when the queue must be
   * looked at next (the next lease, due row, TTL or schedule tick), or null.
   */
  async sweep(ns: string, queue: string): Promise<number | null> {
    const since = this.hints?.mark ?? 0;
    const out = await this.committer.run(sweepPlan(this.now(), ns, queue, this.limits));
    this.moved(ns, queue, out.moved);
    this.hints?.learn(ns, queue, out.wake, since);
    return out.wake.next;
  }

  private moved(ns: string, queue: string, moved: Moved[]): void {
    this.park.events.told(
      ns,
      queue,
      moved.map((m) => ({
        id: m.id,
        status: m.cause === 'ttl' ? 'expired' : m.cause === 'due' ? 'queued' : m.state === 'failed' ? 'failed' : 'retrying',
      })),
    );
    this.park.moved(ns, queue, moved);
    if (moved.some((m) => m.state === 'failed')) this.onFailed?.(ns, queue);
  }
}
