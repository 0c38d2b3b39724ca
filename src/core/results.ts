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
 * together rather than one request each.
 */
import { notInQueue } from './errors.ts';
import type { Committer } from './committer.ts';
import { outcomeOf } from './rows.ts';
import type { ErrorBody } from './settled.ts';
import { endedPlan } from './sql/read.ts';
import type { Outcome } from './types.ts';
import { keys, type Waiters } from './waiters.ts';

/** How long an answer waits, after its first job ended, for others to end too. */
export const RESULTS_LINGER_MS = 10;

/** A job of the wait that ended (its outcome: succeeded, failed or cancelled), or that its queue does not have. */
export type Ended = { id: string; outcome: Outcome } | { id: string; error: ErrorBody };

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
}

export async function waitForAny(w: ResultsWait): Promise<Ended[]> {
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
  const look = async (ids: string[]): Promise<Ended[]> =>
    (await w.committer.run(endedPlan(w.ns, w.queue, JSON.stringify(ids)))).map((r) =>
      r.state === null ? { id: r.id, error: notInQueue(r.id, w.queue).toJSON() } : { id: r.id, outcome: outcomeOf(r) },
    );
  try {
    subscribe(w.ids);
    let ended = await look(w.ids);
    while (!ended.length) {
      const left = w.deadline - w.now();
      if (left <= 0 || stop.signal.aborted) return [];
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
    return ended;
  } finally {
    w.signal?.removeEventListener('abort', onAbort);
    stop.abort();
  }
}
