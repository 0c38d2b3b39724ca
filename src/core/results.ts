/**
 * A wait on many jobs of one queue at once: what a program that fans out (a sweep, an agent's
 * tools) waits with, so that a thousand jobs awaited take one request, not a thousand.
 *
 * It answers as soon as any of them has ended, with every one of them that has by then, and with
 * those the queue does not have (an error each); with none of either, an empty answer once the
 * wait is over. Its waiters park on every job's key before the first look, so an end committed
 * after the look began wakes them, and one committed before it is in what the look reads. A wake
 * is a hint: the woken jobs' rows are read again, and only theirs. After the first end it lingers
 * a moment (RESULTS_LINGER_MS), so the ends of one storage batch, or of the next, come back
 * together rather than one request each. Asked again with its last answer's cursor, a single
 * writer's wait looks only at the jobs that ended since (ends.ts), not at every job again.
 */
import { notInQueue } from './errors.ts';
import type { Committer } from './committer.ts';
import { outcomeOf } from './rows.ts';
import type { ErrorBody } from './settled.ts';
import { endedPlan } from './sql/read.ts';
import type { Outcome } from './types.ts';
import { keys, type Waiters } from './waiters.ts';
import type { EndsLog } from './ends.ts';

/** How long an answer waits, after its first job ended, for others to end too. */
export const RESULTS_LINGER_MS = 10;

/** A job of the wait that ended (its outcome: succeeded, failed or cancelled), or that its queue does not have. */
export type Ended = { id: string; outcome: Outcome } | { id: string; error: ErrorBody };

/**
 * What a wait answers: the jobs that ended, and a cursor (a single writer's, else null) that the
 * caller hands back when it asks again for the rest: that wait then reads again only the rows of
 * the jobs that ended since (ends.ts).
 */
export interface ResultsAnswer {
  ended: Ended[];
  cursor: string | null;
}

export interface ResultsWait {
  committer: Committer;
  waiters: Waiters;
  now: () => number;
  ns: string;
  queue: string;
  /** Distinct, checked ids. */
  ids: string[];
  deadline: number;
  signal?: AbortSignal | undefined;
  /** The single writer's log of ends, and the caller's cursor in it (the last answer's), if any. */
  ends: EndsLog | null;
  after: string | null;
}

export async function waitForAny(w: ResultsWait): Promise<ResultsAnswer> {
  const stop = new AbortController();
  const onAbort = () => stop.abort();
  w.signal?.addEventListener('abort', onAbort, { once: true });
  const woken = new Set<string>();
  let wake: (() => void) | null = null;
  const subscribe = (ids: Iterable<string>) => {
    for (const id of ids)
      void w.waiters.wait(keys.inv(w.ns, id), Math.max(1, w.deadline - w.now()), stop.signal).then((woke) => {
        if (!woke) return;
        woken.add(id);
        wake?.();
      });
  };
  /** Set once a look left out jobs that had ended (RESULTS_BYTES): the answer then vouches for nothing. */
  let cut = false;
  const look = async (ids: string[]): Promise<Ended[]> => {
    if (!ids.length) return [];
    const out = await w.committer.run(endedPlan(w.ns, w.queue, JSON.stringify(ids)));
    cut ||= out.cut;
    return out.rows.map((r) =>
      r.state === null ? { id: r.id, error: notInQueue(r.id, w.queue).toJSON() } : { id: r.id, outcome: outcomeOf(r) },
    );
  };
  try {
    // In this order, with nothing between: an end after the mark is in the log past it, and one
    // after the subscription wakes a waiter; what the cursor vouches for ended before either.
    const cursor = w.ends?.mark() ?? null;
    subscribe(w.ids);
    const since = w.ends?.since(w.after) ?? null;
    let ended = await look(since ? w.ids.filter((id) => since.has(keys.inv(w.ns, id))) : w.ids);
    while (!ended.length) {
      const left = w.deadline - w.now();
      if (left <= 0 || stop.signal.aborted) return { ended: [], cursor };
      if (!woken.size) {
        // Parked until a job of the wait is woken, the wait is over, or its caller left.
        await new Promise<void>((r) => {
          const done = () => {
            clearTimeout(t);
            r();
          };
          const t = setTimeout(done, left);
          stop.signal.addEventListener('abort', done, { once: true });
          wake = done;
        });
        wake = null;
        continue;
      }
      // Others of the same batch, or of the next, wake within the moment.
      await new Promise((r) => setTimeout(r, Math.min(RESULTS_LINGER_MS, left)));
      const now = [...woken];
      woken.clear();
      subscribe(now); // again, before the look: a job woken but not ended (retried by hand) is still awaited
      ended = await look(now);
    }
    // Jobs left out ended before the mark: a cursor would let the next ask skip them.
    return { ended, cursor: cut ? null : cursor };
  } finally {
    w.signal?.removeEventListener('abort', onAbort);
    stop.abort();
  }
}
