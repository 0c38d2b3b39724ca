/**
 * Where callers wait for a transition: long-poll claims, result waits and journal readers park
 * on a key and are woken (or handed their answer, see handoff.ts) by the transition that can
 * satisfy them. The rows stay the only truth: a woken caller looks at them again.
 */
import type { Committer } from './committer.ts';
import { ParkedClaim, ride, type Rider } from './handoff.ts';
import type { Moved } from './sql/expire.ts';
import type { Plan } from './plan.ts';
import { isClaimKey, keys, Waiters } from './waiters.ts';
import { Tails } from './tails.ts';
import { Feed } from './feed.ts';
import type { EndsLog } from './ends.ts';

/** A wait for a condition that a transition may satisfy: how to look, where to park, when to give up. */
export interface Wait<T> {
  /** Where to park: a key, or one chosen afresh before each nap. */
  key: string | (() => string);
  deadline: number;
  signal?: AbortSignal | undefined;
  /** Answers, or undefined to park and look again once woken. */
  look(): Promise<T | undefined>;
  /** How long to park before looking again anyway (default: until the deadline). */
  nap?(left: number): Promise<number>;
  /** A rider a transition can answer directly (handoff.ts). */
  rider?(): Rider<T>;
  /** Parks this long (with its rider) before the first look: a transition due soon may answer it. */
  parkFirstMs?: number;
  gaveUp(): Promise<T>;
}

export class Parking {
  readonly waiters = new Waiters();
  /** The known ends of followed journals (tails.ts): dropped by any wake of their key but an append's. */
  readonly tails = new Tails();
  /** The lifecycle feed and the transition counters (feed.ts). */
  readonly events: Feed;
  /** The jobs ended lately, in order (ends.ts): a single writer's (set by the Engine), else none. */
  ends: EndsLog | null = null;
  /** Told when an invocation of `queue` finished (its retention clock starts): the plane schedules its purge. */
  onFinish: ((ns: string, queue: string) => void) | null = null;
  private readonly committer: Committer;
  private readonly now: () => number;
  /** Bumped on every wake, so a look can tell a change landed while it was in flight. */
  private epoch = 0;
  /** Per queue and running-cap key (keys.queue, keys.capped): wakes so far (see wakesOf). */
  private readonly claimWakes = new Map<string, number>();
  /** Calls of wakeAll, which count as a wake of every key. */
  private allWakes = 0;
  /** Per queue key: when a transition last fed it (feed), and whether its last claim came back short. */
  private readonly fedAt = new Map<string, number>();
  private readonly drained = new Map<string, boolean>();
  /** Per queue key: the wake count at which the look began whose claim came back short (see rests). */
  private readonly restAt = new Map<string, number>();

  constructor(committer: Committer, now: () => number) {
    this.committer = committer;
    this.now = now;
    this.events = new Feed(now);
  }

  /** Bumped by every wake: a look begun at one value has seen every change woken before it. */
  get changes(): number {
    return this.epoch;
  }

  /**
   * Looks until it answers: between looks it parks on `key` until a transition wakes it (or a
   * rider is handed the answer), the nap ends, or the deadline passes. A wake that lands while a
   * look is in flight is not lost: its key's wake count tells (wakesOf), and it looks again at
   * once. `parkFirstMs`: the first look waits that long, parked with its rider.
   */
  async until<T>(w: Wait<T>): Promise<T> {
    const keyOf = () => (typeof w.key === 'function' ? w.key() : w.key);
    for (let first = true; ; first = false) {
      const key = keyOf();
      const seen = this.wakesOf(key);
      const seenAll = this.epoch;
      // A wake the look may have missed: of its key, or of any key if the key changed meanwhile.
      const missed = () => (keyOf() === key ? this.wakesOf(key) !== seen : this.epoch !== seenAll);
      const parkFirst = first && (w.parkFirstMs ?? 0) > 0;
      if (!parkFirst) {
        const got = await w.look();
        if (got !== undefined) return got;
        if (missed()) continue;
      }
      const left = w.deadline - this.now();
      if (left <= 0 || w.signal?.aborted) return w.gaveUp();
      const nap = parkFirst ? Math.min(left, w.parkFirstMs!) : w.nap ? await w.nap(left) : left;
      if (missed()) continue;
      const rider = w.rider?.();
      const woken = await this.waiters.wait(keyOf(), Math.max(1, nap), w.signal, rider);
      if (rider?.riding) await rider.riding;
      if (rider?.value) return rider.value;
      if (!woken && (nap >= left || w.signal?.aborted)) return w.gaveUp();
    }
  }

  /** Commits `plan` with the riders parked on `key` appended to its batch (handoff.ts); `alone`: see committer.ts. */
  async withRiders<T>(key: string, plan: Plan<T>, most?: number, alone = false): Promise<{ out: T; riders: Rider<unknown>[] }> {
    const r = ride(this.waiters, key, this.now(), plan, most);
    try {
      return { out: await this.committer.run(r.plan, { alone }), riders: r.riders };
    } finally {
      r.release();
    }
  }

  /** Runs a transition that queues up to `most` rows on `queue`, with claims parked there riding along. */
  async feed<T>(ns: string, queue: string, plan: Plan<T>, most: number, queued: (out: T) => number): Promise<T> {
    const key = keys.queue(ns, queue);
    const mark = this.wakesOf(key);
    const { out, riders } = await this.withRiders(key, plan, most);
    const n = queued(out);
    // A rider that came back short means nothing was left to claim: no one else need wake.
    const drained = riders.some((x) => x instanceof ParkedClaim && x.short);
    // Another change woke the key while this batch was out: the store may have applied it after.
    const others = this.wakesOf(key) !== mark;
    if (n > 0) this.wake(key, drained ? 0 : n);
    this.fedAt.set(key, this.now());
    if (riders.some((x) => x instanceof ParkedClaim)) {
      this.drained.set(key, drained);
      // The queue rests from here (rests()) when its riders drained it and nothing else changed it.
      if (drained && !others) this.restAt.set(key, this.wakesOf(key));
      else this.restAt.delete(key);
    }
    return out;
  }

  /** The wake count of a claim key now: handed to `claimed` by a look that reads it before it begins. */
  mark(key: string): number {
    return this.wakesOf(key);
  }

  /** A claim of `key` came back: short (fewer rows than it asked for) or full; `mark`: read as its look began. */
  claimed(key: string, short: boolean, mark?: number): void {
    this.drained.set(key, short);
    if (short && mark !== undefined) this.restAt.set(key, mark);
    else this.restAt.delete(key);
  }

  /**
   * The last look at `key` came back short and nothing woke the key since that look began: a
   * claim looking now would find what it found. Only a single writer, whose every change to the
   * queue's rows wakes its key (or all keys), may act on it; rows that come due with time are the
   * hints' to tell (work.ts).
   */
  rests(key: string): boolean {
    const at = this.restAt.get(key);
    return at !== undefined && at === this.wakesOf(key);
  }

  /**
   * The queue's claims keep up with its producers: its last claim (a look, or a ride with a
   * submit) came back short, and a transition fed it within `ms`. Then another is due soon, and a
   * claim may wait for it to hand it rows rather than look now (work.ts).
   */
  keepsUp(key: string, ms: number): boolean {
    const at = this.fedAt.get(key);
    return this.drained.get(key) === true && at !== undefined && this.now() - at <= ms;
  }

  /** Rows a sweep moved: claims wake for the ones now queued, result waits and readers for the failed ones. */
  moved(ns: string, queue: string, moved: Moved[]): void {
    let queued = 0;
    for (const r of moved) {
      if (r.state === 'queued') queued++;
      else if (r.state === 'failed') {
        this.finished(ns, r.id);
        this.onFinish?.(ns, queue);
      }
      this.wake(keys.journal(ns, r.id));
    }
    if (queued) this.wake(keys.queue(ns, queue), queued);
    if (moved.length) this.wake(keys.capped(ns, queue), moved.length);
  }

  /**
   * Wakes of `key` so far, for a look to tell whether one landed while it was in flight: counted
   * per key for a queue's claims (its queue and running-cap keys, one pair per queue), so an ack
   * that ends a job does not send a claim of another kind of wait to look again; every wake for
   * the others.
   */
  private wakesOf(key: string): number {
    return isClaimKey(key) ? (this.claimWakes.get(key) ?? 0) + this.allWakes : this.epoch;
  }

  /** Wakes up to `n` waiters of `key`, oldest first. A journal's key: its tail is no longer known. */
  wake(key: string, n?: number): void {
    if (isClaimKey(key)) this.claimWakes.set(key, (this.claimWakes.get(key) ?? 0) + 1);
    this.epoch++;
    this.tails.drop(key);
    this.waiters.wake(key, n);
  }

  /** An append to the journal of `key` committed: its readers look again, and its tail (extended by the ride) stays. */
  appended(key: string): void {
    this.epoch++;
    this.waiters.wake(key);
  }

  /** An invocation ended: its result waiters and journal readers look again. */
  finished(ns: string, id: string): void {
    const key = keys.inv(ns, id);
    this.ends?.noted(key);
    this.wake(key);
    this.wake(keys.journal(ns, id));
  }

  /** A running invocation of `queue` ended: as finished, and a claim held back by the running cap may go. */
  ended(ns: string, queue: string, id: string): void {
    this.finished(ns, id);
    this.onFinish?.(ns, queue);
    this.wake(keys.capped(ns, queue), 1);
  }

  /** Wakes everything parked (another process changed the store). */
  wakeAll(): void {
    this.ends?.clear();
    this.allWakes++;
    this.epoch++;
    this.tails.clear();
    this.waiters.wakeAll();
  }
}
