/**
 * The contract, executable over any storage port. The queue Durable Object runs it over D1, the
 * local plane over node:sqlite. It validates input, runs each verb's plan through group commit,
 * parks waiters (park.ts) and wakes them after the transition that satisfies them. The journal
 * verbs are `engine.journal` (journal.ts).
 */
import { Committer, type CommitterOptions } from './committer.ts';
import { notFound } from './errors.ts';
import { ACKS_WAIT_MS, DEFAULT_LIMITS, type Limits } from './limits.ts';
import { outcomeOf } from './rows.ts';
import { isTerminal } from './states.ts';
import { claimPlan, nextLeasePlan, sweepPlan } from './claims.ts';
import type { Port } from './port.ts';
import type { Plan } from './plan.ts';
import { ackPlan, type AckItem, type Finished } from './sql/ack.ts';
import { cancelPlan } from './sql/cancel.ts';
import { configurePlan } from './sql/configure.ts';
import type { Expired } from './sql/expire.ts';
import { heartbeatPlan } from './sql/heartbeat.ts';
import { nackPlan } from './sql/nack.ts';
import { countPlan, getPlan, queueOfPlan, queuesPlan } from './sql/read.ts';
import { submitPlan, type SubmitInput, type Submitted } from './sql/submit.ts';
import type { Claimed, HeartbeatAnswer, Invocation, Outcome } from './types.ts';
import * as v from './validate.ts';
import {
  ackInput, claimArgs, holder, nackInput, settingsInput, submitInput,
  type AckRequest, type ClaimArgs, type ClaimRequest, type HolderRequest, type NackRequest, type SettingsRequest, type SubmitRequest,
} from './requests.ts';
import { failed, fill, one, parseEach, type Settled } from './settled.ts';
import { keys } from './waiters.ts';
import { ParkedClaim } from './handoff.ts';
import { Journal } from './journal.ts';
import { Parking } from './park.ts';

export interface EngineOptions {
  limits?: Partial<Limits>;
  now?: () => number;
  random?: () => number;
  committer?: CommitterOptions;
  /** Told of every new lease deadline, so a plane can arm a timer (the Durable Object's alarm). */
  onLease?: (ns: string, queue: string, deadline: number) => void;
}

type Nacked = { state: 'queued' | 'failed'; absorbed: boolean };

export class Engine {
  readonly limits: Limits;
  readonly committer: Committer;
  readonly park: Parking;
  readonly journal: Journal;
  /** Queues seen marked sampled (their level counts are kept; see claims.ts). */
  private readonly sampled = new Set<string>();
  private readonly now: () => number;
  private readonly random: () => number;
  private readonly onLease: EngineOptions['onLease'];

  constructor(port: Port, opts: EngineOptions = {}) {
    this.limits = { ...DEFAULT_LIMITS, ...opts.limits };
    this.now = opts.now ?? Date.now;
    this.random = opts.random ?? Math.random;
    this.onLease = opts.onLease;
    this.committer = new Committer(port, opts.committer);
    this.park = new Parking(this.committer, this.now);
    this.journal = new Journal(this.committer, this.park, this.limits, this.now);
  }

  // ---------------------------------------------------------------- producers

  async submit(ns: string, queue: string, req: SubmitRequest): Promise<Submitted> {
    return one(await this.submitted(ns, v.queue(queue, this.limits), [submitInput(req, this.limits)]));
  }

  /** Submits many: each item keeps its own id, key, idempotency and error; valid ones go in few set-based INSERTs. */
  async submitMany(ns: string, queue: string, items: SubmitRequest[]): Promise<Settled<Submitted>[]> {
    const q = v.queue(queue, this.limits);
    const { out, valid, at } = parseEach(v.batch(items, this.limits), (it) => submitInput(it, this.limits));
    return fill(out, at, valid.length ? await this.submitted(ns, q, valid) : []);
  }

  private submitted(ns: string, q: string, inputs: SubmitInput[]) {
    return this.feed(ns, q, submitPlan(this.now(), ns, q, inputs), inputs.length, (rs) => rs.filter((r) => !(r instanceof Error) && r.created).length);
  }

  async cancel(ns: string, id: unknown, queue: string | null = null): Promise<boolean> {
    const out = await this.committer.run(cancelPlan(this.now(), ns, v.id(id, this.limits), queue));
    if (out.cancelled) this.park.finished(ns, String(id));
    return out.cancelled;
  }

  // (async: a bad argument is a rejected promise, never a throw, as for every verb)
  get = async (ns: string, id: unknown, queue: string | null = null): Promise<Invocation | null> => this.committer.run(getPlan(ns, v.id(id, this.limits), queue));
  queueOf = async (ns: string, id: unknown): Promise<string | null> => this.committer.run(queueOfPlan(ns, v.id(id, this.limits)));
  count = async (ns: string, queue: unknown, state?: unknown): Promise<number> => this.committer.run(countPlan(ns, v.queue(queue, this.limits), v.state(state, 'queued')));
  /** The queues of a namespace that ever held work or settings. */
  queues = async (ns: string): Promise<string[]> => this.committer.run(queuesPlan(ns));

  /** Waits until the invocation is terminal, up to `timeoutMs`; then answers its outcome. */
  async result(ns: string, id: unknown, timeoutMs?: unknown, signal?: AbortSignal, queue: string | null = null): Promise<Outcome> {
    const invId = v.id(id, this.limits);
    const wait = v.waitMs('timeout', timeoutMs, 30_000, this.limits.maxResultWaitMs);
    let last: Invocation | null = null;
    const look = async () => {
      last = await this.get(ns, invId, queue);
      if (!last) throw notFound(`invocation ${JSON.stringify(invId)}`);
      return isTerminal(last.state) ? outcomeOf({ state: last.state, result: last.result, error: last.error ? JSON.stringify(last.error) : null }) : undefined;
    };
    return this.park.until({
      key: keys.inv(ns, invId), deadline: this.now() + wait, signal, look,
      gaveUp: async () => (await look()) ?? { state: last!.state as 'queued' | 'running', timedOut: true },
    });
  }

  async configure(ns: string, queue: unknown, cfg: SettingsRequest): Promise<void> {
    await this.committer.run(configurePlan(this.now(), ns, v.queue(queue, this.limits), settingsInput(cfg, this.limits)));
  }

  // ---------------------------------------------------------------- workers

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
        this.afterExpire(ns, q, out.expired);
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
    const out = fed ? await this.feed(ns, fed, plan, 1, requeues) : await this.committer.run(plan);
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

  // ---------------------------------------------------------------- leases

  /** Returns expired running rows of a queue to queued (or failed); answers the next deadline. */
  async expire(ns: string, queue: string): Promise<number | null> {
    const out = await this.committer.run(sweepPlan(this.now(), ns, queue, this.limits));
    this.afterExpire(ns, queue, out.expired);
    return out.next;
  }

  // ---------------------------------------------------------------- internals

  /** Runs a transition that queues up to `most` rows on `queue`, with claims parked there riding along. */
  private async feed<T>(ns: string, queue: string, plan: Plan<T>, most: number, queued: (out: T) => number): Promise<T> {
    const key = keys.queue(ns, queue);
    const { out, riders } = await this.park.withRiders(key, plan, most);
    const n = queued(out);
    // A rider that came back short means nothing was left to claim: no one else need wake.
    const drained = riders.some((x) => x instanceof ParkedClaim && x.short);
    if (n > 0) this.park.wake(key, drained ? 0 : n);
    return out;
  }

  private afterExpire(ns: string, queue: string, expired: Expired[]): void {
    let requeued = 0;
    for (const r of expired) {
      if (r.state === 'queued') requeued++;
      else this.park.finished(ns, r.id);
      this.park.wake(keys.journal(ns, r.id));
    }
    if (requeued) this.park.wake(keys.queue(ns, queue), requeued);
  }
}

export type { Submitted, Settled, SubmitRequest, ClaimRequest, HolderRequest, AckRequest, NackRequest, SettingsRequest };
export type { Appended } from './sql/append.ts';
export type { AppendRequest } from './requests.ts';
