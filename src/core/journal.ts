/**
 * The journal verbs: the holding worker appends frames, readers page or follow them live, and
 * producers trim. Frames are derived data: the terminal result lives on the invocation row, and
 * a read past a trim falls back to that row.
 */
import type { Committer } from './committer.ts';
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

  constructor(committer: Committer, park: Parking, limits: Limits, now: () => number) {
    this.committer = committer;
    this.park = park;
    this.limits = limits;
    this.now = now;
  }

  async append(ns: string, id: unknown, req: AppendRequest): Promise<Appended> {
    const invId = v.id(id, this.limits);
    const frame = frameInput(req, this.limits);
    const key = keys.journal(ns, invId);
    // Readers following this journal ride along: they get the new frame in the same round trip.
    const { out } = await this.park.withRiders(key, appendPlan(this.now(), ns, invId, req.queue ?? null, holder(req), frame, this.limits.framesPerInvocation));
    if (out.absorbed) return out;
    // Unless a reader's read rode along and took the new frame into the tail, the tail no longer knows the end.
    if (!this.park.tails.covers(key, out.seq)) this.park.tails.drop(key);
    this.park.appended(key);
    return out;
  }

  async read(ns: string, id: unknown, since?: unknown, limit?: unknown, queue: string | null = null): Promise<JournalPage> {
    return this.committer.run(readPlan(ns, v.id(id, this.limits), journalCursor(since), pageLimit(limit), queue));
  }

  /** Like read, but waits up to `timeoutMs` until there is a frame after `since` or the stream ended. */
  async follow(ns: string, id: unknown, since?: unknown, timeoutMs?: unknown, signal?: AbortSignal, limit?: unknown, queue: string | null = null): Promise<JournalPage> {
    const invId = v.id(id, this.limits);
    const cursor = journalCursor(since);
    const lim = pageLimit(limit);
    const wait = v.waitMs('timeout', timeoutMs, 30_000, this.limits.maxResultWaitMs);
    const key = keys.journal(ns, invId);
    const tails = this.park.tails;
    let last: JournalPage;
    return this.park.until({
      key, deadline: this.now() + wait, signal,
      look: async () => {
        // The journal's known end answers without a read (tails.ts); past it, read the rows.
        const known = tails.page(key, cursor, lim);
        if (known) last = known;
        else tails.learn(key, cursor, lim, (last = await this.committer.run(readPlan(ns, invId, cursor, lim, queue))));
        return last.frames.length || last.done ? last : undefined;
      },
      // Parked, a reader rides along with the next append to this invocation (handoff.ts).
      rider: () => new FollowingReader(ns, invId, cursor, lim, queue, (page) => tails.learn(key, cursor, lim, page)),
      gaveUp: async () => last,
    });
  }

  async trim(ns: string, id: unknown, keepLast: unknown, queue: string | null = null): Promise<number> {
    const invId = v.id(id, this.limits);
    const out = await this.committer.run(trimPlan(ns, invId, queue, v.nonNegInt('keep_last', keepLast, 0)));
    this.park.tails.drop(keys.journal(ns, invId));
    return out.trimmed;
  }
}
