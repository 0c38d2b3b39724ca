/**
 * Hand-off. A caller parked on a wait rides along with the next transition that can satisfy it:
 * its read (or guarded claim) is appended to that transition's statements, so the change and the
 * answer take one round trip and one transaction, and the parked caller answers without a wake
 * and a second round trip.
 *
 * - A claim parked on an empty queue rides with the next submit (or retrying nack) there; each
 *   claim UPDATE keeps its own guard, and one that finds nothing stays parked. Sampled
 *   (boltzmann) claims do not ride: they are woken and sample again.
 * - A journal reader following an invocation rides with the next append to it.
 */
import { Then, type Plan } from './plan.ts';
import { readPlan } from './sql/journal-read.ts';
import { claimOrder, claimStmts, toClaimed, type ClaimInput } from './sql/claim.ts';
import { type KnownWorkers, registration } from './sql/workers.ts';
import type { Claimed, JournalPage } from './types.ts';
import type { Waiters } from './waiters.ts';
import type { Stmt } from './port.ts';
import type { Hints } from './hints.ts';

/** What a parked waiter carries so a transition can answer it. */
export interface Rider<T> {
  readonly rider: true;
  /** Its statements, as of now; null when it cannot ride at the moment. */
  plan(now: number): Plan<T> | null;
  /** Keeps an answer; true when it satisfies the waiter (which is then woken). */
  take(value: T): boolean;
  /** What a ride handed it, once one satisfied it. */
  value: T | null;
  /** Set while riding in a batch; settles when that batch is done (or failed). */
  riding: Promise<void> | null;
  /** The most rows it can take (a claim's max); unset for riders any write may satisfy. */
  readonly wants?: number;
  /**
   * Riders with the same `shares` need the same statements (readers of one journal at one cursor):
   * one copy of them goes in the batch, and each rider reads its answer from that copy's results.
   */
  readonly shares?: string;
}

const isRider = (d: unknown): d is Rider<unknown> => typeof d === 'object' && d !== null && (d as Rider<unknown>).rider === true;

/** A claim parked on an empty queue; `value` holds what a submit's batch handed it. */
export class ParkedClaim implements Rider<Claimed[]> {
  readonly rider = true as const;
  riding: Promise<void> | null = null;
  value: Claimed[] | null = null;
  /** Set when a ride came back short: the queue had nothing more to claim. */
  short = false;
  private readonly ns: string;
  private readonly queue: string;
  private readonly input: ClaimInput;
  readonly wants: number;
  private readonly defaultLeaseMs: number;
  private readonly hints: () => Hints | undefined;
  /** The engine's registered workers (sql/workers.ts). */
  private readonly workers: KnownWorkers;

  constructor(
    ns: string,
    queue: string,
    input: ClaimInput,
    max: number,
    defaultLeaseMs: number,
    hints: () => Hints | undefined,
    workers: KnownWorkers,
  ) {
    this.workers = workers;
    this.ns = ns;
    this.queue = queue;
    this.input = input;
    this.wants = max;
    this.defaultLeaseMs = defaultLeaseMs;
    this.hints = hints;
  }

  plan(now: number): Plan<Claimed[]> {
    // A claim that parked before it ever looked (work.ts `resting`) may not have registered its worker.
    const reg = registration(this.workers, this.ns, this.input.workerId);
    return {
      stmts: [...reg.stmts, ...claimStmts(now, this.ns, this.queue, this.input, this.defaultLeaseMs, null, this.wants, this.hints())],
      done: (rs) => {
        const rows = rs[reg.stmts.length]!.rows;
        reg.done(rows);
        return claimOrder(rows, this.input.kind).map(toClaimed);
      },
    };
  }

  take(rows: Claimed[]): boolean {
    this.short = rows.length < this.wants;
    if (rows.length) this.value = rows;
    return rows.length > 0;
  }
}

/**
 * A journal reader waiting for frames after its cursor; `value` holds what an append handed it.
 * Readers at one cursor share one read (`shares`), so a thousand followers of a job cost an append
 * what one does. `learn` sees every page a ride read (tails.ts keeps the journal's end from it).
 */
export class FollowingReader implements Rider<JournalPage> {
  readonly rider = true as const;
  riding: Promise<void> | null = null;
  value: JournalPage | null = null;
  readonly shares: string;
  private readonly ns: string;
  private readonly id: string;
  private readonly since: number;
  private readonly limit: number;
  private readonly queue: string | null;
  private readonly learn: ((page: JournalPage) => void) | undefined;

  constructor(ns: string, id: string, since: number, limit: number, queue: string | null = null, learn?: (page: JournalPage) => void) {
    this.ns = ns;
    this.id = id;
    this.since = since;
    this.limit = limit;
    this.queue = queue;
    this.learn = learn;
    this.shares = `read\u0000${ns}\u0000${id}\u0000${since}\u0000${limit}\u0000${queue ?? ''}`;
  }

  plan(): Plan<JournalPage> {
    return readPlan(this.ns, this.id, this.since, this.limit, this.queue);
  }

  take(page: JournalPage): boolean {
    this.learn?.(page);
    if (!page.frames.length && !page.done) return false;
    this.value = page;
    return true;
  }
}

export interface Ride<T> {
  plan: Plan<T>;
  /** The riders that went along (to inspect what they got once the plan is done). */
  riders: Rider<unknown>[];
  /** Call once the plan settled either way: riders of a failed batch go back to waiting. */
  release(): void;
}

/**
 * Appends the riders parked on `key` to `plan`, to run after its statements in the same batch.
 * `most` bounds the rows the plan can give: claims ride, oldest first, only until their wants
 * exceed it (the others stay parked, and are woken if rows are left over).
 */
export function ride<T>(waiters: Waiters, key: string, now: number, plan: Plan<T>, most = Infinity): Ride<T> {
  const parked = waiters.carrying(key, isRider).filter((r) => r.data.riding === null);
  /** `at`: where its statements' results start, relative to the plan's own; shared ones reuse the first copy's. */
  const going: { r: (typeof parked)[number]; p: Plan<unknown>; at: number }[] = [];
  const shared = new Map<string, number>();
  const stmts: Stmt[] = [];
  // Until their wants exceed it: then if the rows run out, a rider comes back short and says so.
  let room = most;
  for (const r of parked) {
    if (room < 0) break;
    const p = r.data.plan(now);
    if (!p) continue;
    const s = r.data.shares;
    let at = s === undefined ? undefined : shared.get(s);
    if (at === undefined) {
      at = stmts.length;
      stmts.push(...p.stmts);
      if (s !== undefined) shared.set(s, at);
    }
    going.push({ r, p, at });
    if (r.data.wants !== undefined) room -= r.data.wants;
  }
  if (!going.length) return { plan, riders: [], release: () => {} };
  let settle!: () => void;
  const riding = new Promise<void>((res) => (settle = res));
  for (const { r } of going) r.data.riding = riding;
  const release = () => {
    for (const { r } of going) r.data.riding = null;
    settle();
  };
  const n = plan.stmts.length;
  return {
    plan: {
      stmts: [...plan.stmts, ...stmts],
      done: (rs) => {
        for (const { r, p, at } of going) {
          const mine = rs.slice(n + at, n + at + p.stmts.length);
          try {
            const v = p.done(mine);
            if (!(v instanceof Then) && r.data.take(v)) r.wake();
          } catch {
            /* a rider's own failure leaves it parked; it re-reads when woken */
          }
        }
        release();
        return plan.done(rs.slice(0, n));
      },
    },
    riders: going.map(({ r }) => r.data),
    release,
  };
}
