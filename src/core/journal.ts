/**
 * The journal verbs: the holding worker appends frames, readers page or follow them live, and
 * producers trim. Frames are derived data: the terminal result lives on the invocation row, and
 * a read past a trim falls back to that row.
 */
import type { Committer } from './committer.ts';
import { Then, type Plan } from './plan.ts';
import { FollowingReader } from './handoff.ts';
import type { Limits } from './limits.ts';
import type { Parking } from './park.ts';
import { appendPlan, type Appended } from './sql/append.ts';
import { readPlan } from './sql/journal-read.ts';
import { trimPlan } from './sql/trim.ts';
import type { JournalPage } from './types.ts';
import * as v from './validate.ts';
import { frameInput, holder, journalCursor, pageLimit, type AppendRequest } from './requests.ts';
import { keys } from './waiters.ts';

export class Journal {
  private readonly committer: Committer;
  private readonly park: Parking;
  private readonly limits: Limits;
  private readonly now: () => number;
  /** Journal reads in flight, by journal, cursor, limit and epoch (shared()). */
  private readonly reading = new Map<string, Promise<JournalPage>>();

  constructor(committer: Committer, park: Parking, limits: Limits, now: () => number) {
    this.committer = committer;
    this.park = park;
    this.limits = limits;
    this.now = now;
  }

  async append(ns: string, id: unknown, req: AppendRequest): Promise<Omit<Appended, 'frame'>> {
    const invId = v.id(id, this.limits);
    const frame = frameInput(req, this.limits);
    const key = keys.journal(ns, invId);
    const plan = appendPlan(this.now(), ns, invId, req.queue ?? null, holder(req), frame, this.limits.framesPerInvocation);
    // Readers following this journal ride along: they get the new frame in the same round trip.
    // Alone (committer.ts): the journal's known end (tails.ts) follows appends and reads in commit order.
    const { out } = await this.park.withRiders(
      key,
      this.learning(plan, (a) => a.frame && this.park.tails.appended(key, a.frame)),
      undefined,
      true,
    );
    if (!out.absorbed) this.park.appended(key);
    return { seq: out.seq, queue: out.queue, final: out.final, absorbed: out.absorbed };
  }

  async read(ns: string, id: unknown, since?: unknown, limit?: unknown, queue: string | null = null): Promise<JournalPage> {
    return this.committer.run(readPlan(ns, v.id(id, this.limits), journalCursor(since), pageLimit(limit), queue));
  }

  /** Like read, but waits up to `timeoutMs` until there is a frame after `since` or the stream ended. */
  async follow(
    ns: string,
    id: unknown,
    since?: unknown,
    timeoutMs?: unknown,
    signal?: AbortSignal,
    limit?: unknown,
    queue: string | null = null,
  ): Promise<JournalPage> {
    const invId = v.id(id, this.limits);
    const cursor = journalCursor(since);
    const lim = pageLimit(limit);
    const wait = v.waitMs('timeout', timeoutMs, 30_000, this.limits.maxResultWaitMs);
    const key = keys.journal(ns, invId);
    const tails = this.park.tails;
    let last: JournalPage;
    return this.park.until({
      key,
      deadline: this.now() + wait,
      signal,
      look: async () => {
        // The journal's known end answers without a read (tails.ts); past it, read the rows, once
        // for every follower that looks at this cursor now (since the last change: the epoch).
        last =
          tails.page(key, cursor, lim) ??
          (await this.shared(`${key}\u0000${cursor}\u0000${lim}\u0000${queue ?? ''}\u0000${this.park.changes}`, () =>
            this.committer.run(
              this.learning(readPlan(ns, invId, cursor, lim, queue), (page) => tails.learn(key, cursor, lim, page)),
              { alone: true },
            ),
          ));
        return last.frames.length || last.done ? last : undefined;
      },
      // Parked, a reader rides along with the next append to this invocation (handoff.ts).
      rider: () => new FollowingReader(ns, invId, cursor, lim, queue, (page) => tails.learn(key, cursor, lim, page)),
      gaveUp: async () => last,
    });
  }

  /** `plan`, telling `seen` its answer as its batch commits: in commit order, before any later batch. */
  private learning<T>(plan: Plan<T>, seen: (out: T) => unknown): Plan<T> {
    return {
      stmts: plan.stmts,
      done: (rs) => {
        const out = plan.done(rs);
        if (!(out instanceof Then)) seen(out);
        return out;
      },
    };
  }

  /** One read in flight per `key`: concurrent callers share it. */
  private shared(key: string, read: () => Promise<JournalPage>): Promise<JournalPage> {
    let p = this.reading.get(key);
    if (!p) {
      p = read().finally(() => this.reading.delete(key));
      this.reading.set(key, p);
    }
    return p;
  }

  async trim(ns: string, id: unknown, keepLast: unknown, queue: string | null = null): Promise<number> {
    const invId = v.id(id, this.limits);
    const out = await this.committer.run(trimPlan(ns, invId, queue, v.nonNegInt('keep_last', keepLast, 0)));
    this.park.tails.drop(keys.journal(ns, invId));
    return out.trimmed;
  }
}
