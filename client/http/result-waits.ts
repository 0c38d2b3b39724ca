/**
 * Result waits shared: the many `result()` calls a program makes at once (a sweep's
 * `Promise.all(handles.map((h) => h.result()))`, an agent awaiting its tools) wait on the plane
 * together, a request for up to 1,000 jobs of a queue (`results`), rather than a connection each.
 * Three thousand awaited jobs are three requests, where they were three thousand sockets: past a
 * shell's 1,024 descriptors, and a Worker request each on a hosted plane.
 *
 * Waits begun in the same tick go out together; waits begun while requests of their queue are
 * out go in a new one, and past MAX_REQUESTS of a queue the smallest request is called off and its
 * jobs join the new one. An answer settles the jobs that ended, and the rest wait on in the next
 * request, with the plane's cursor, so that it reads again only the jobs that ended since (a round
 * that saw no end goes without, and reads every row). A job the queue does not have (a wrong
 * hint), a refused request, or a wait's own deadline is handed back to the single wait, which says
 * what it always said.
 */
import type { Json } from './wire.ts';

/** The most ids one request carries (the plane's batch limit). */
export const MAX_IDS = 1000;
/** The most requests out at once per queue, before the smallest is merged into the next. */
export const MAX_REQUESTS = 4;

/** One job's answer from the plane: `{id, state, result}`, `{id, state, error}`, or `{id, error}`. */
export type Item = Json & { id: string };

interface Waiter {
  id: string;
  /** Settles the caller with the plane's answer for its job. */
  answer: (item: Item) => void;
  /** Hands the caller back to the single wait (its own deadline, error and message). */
  alone: () => void;
}

interface Out {
  ids: Set<string>;
  ctl: AbortController;
  merged: boolean;
  /** The plane's cursor from the last answer: the next round reads again only jobs ended since. */
  cursor: string | null;
}

/** One request of the plane's `results` for these ids of `queue` (its longest wait: the plane's slice), after `cursor`. */
export type Poll = (
  queue: string,
  ids: string[],
  signal: AbortSignal,
  cursor: string | null,
) => Promise<{ items: Item[]; cursor: string | null }>;

export class ResultWaits {
  private readonly waiting = new Map<string, Map<string, Set<Waiter>>>();
  private readonly unsent = new Map<string, Set<string>>();
  private readonly out = new Map<string, Set<Out>>();
  private scheduled = false;

  private readonly poll: Poll;

  constructor(poll: Poll) {
    this.poll = poll;
  }

  /** Waits on `id` of `queue` with the others; `answer` once it ended, or `alone` when the single wait must take it. */
  add(queue: string, id: string, answer: (item: Item) => void, alone: () => void): () => void {
    const w: Waiter = { id, answer, alone };
    const ofQueue = this.waiting.get(queue) ?? new Map<string, Set<Waiter>>();
    this.waiting.set(queue, ofQueue);
    const ws = ofQueue.get(id);
    if (ws) ws.add(w);
    else {
      ofQueue.set(id, new Set([w]));
      if (!this.sentIn(queue, id)) this.send(queue, id);
    }
    return () => this.drop(queue, w);
  }

  /**
   * The plane's answer for `id` of `queue` once it ended, or null when the single wait must take
   * it: its `deadline` (ms since the epoch) passed, its `signal` aborted, or the shared wait handed it back.
   */
  wait(queue: string, id: string, deadline: number, signal?: AbortSignal): Promise<Item | null> {
    return new Promise((resolve) => {
      if (signal?.aborted) return resolve(null);
      let timer: ReturnType<typeof setTimeout> | undefined;
      const done = (item: Item | null) => {
        if (timer !== undefined) clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
        drop();
        resolve(item);
      };
      const onAbort = () => done(null);
      const drop = this.add(queue, id, done, () => done(null));
      const left = deadline - Date.now();
      if (left < 2 ** 31 - 1) timer = setTimeout(() => done(null), left);
      signal?.addEventListener('abort', onAbort, { once: true });
    });
  }

  /** How many jobs are awaited, and how many requests are out (for tests and the benchmark). */
  get size(): { jobs: number; requests: number } {
    let jobs = 0;
    let requests = 0;
    for (const m of this.waiting.values()) jobs += m.size;
    for (const s of this.out.values()) requests += s.size;
    return { jobs, requests };
  }

  private sentIn(queue: string, id: string): boolean {
    for (const o of this.out.get(queue) ?? []) if (o.ids.has(id)) return true;
    return this.unsent.get(queue)?.has(id) ?? false;
  }

  private send(queue: string, id: string): void {
    const u = this.unsent.get(queue) ?? new Set<string>();
    u.add(id);
    this.unsent.set(queue, u);
    if (this.scheduled) return;
    this.scheduled = true;
    queueMicrotask(() => {
      this.scheduled = false;
      for (const q of [...this.unsent.keys()]) this.flush(q);
    });
  }

  private flush(queue: string): void {
    const ids = this.unsent.get(queue);
    this.unsent.delete(queue);
    if (!ids?.size) return;
    const outs = this.out.get(queue) ?? new Set<Out>();
    this.out.set(queue, outs);
    while (outs.size >= MAX_REQUESTS) {
      // The smallest request out is called off; its jobs go with these.
      const smallest = [...outs].reduce((a, b) => (b.ids.size < a.ids.size ? b : a));
      outs.delete(smallest);
      smallest.merged = true;
      smallest.ctl.abort();
      for (const id of smallest.ids) ids.add(id);
    }
    const all = [...ids];
    for (let i = 0; i < all.length; i += MAX_IDS) {
      const o: Out = { ids: new Set(all.slice(i, i + MAX_IDS)), ctl: new AbortController(), merged: false, cursor: null };
      outs.add(o);
      void this.run(queue, o);
    }
  }

  /** One request's loop: asks until each of its jobs ended, or none is awaited any more. */
  private async run(queue: string, o: Out): Promise<void> {
    for (;;) {
      for (const id of o.ids) if (!this.waiting.get(queue)?.has(id)) o.ids.delete(id);
      if (!o.ids.size || o.merged) break;
      let items: Item[];
      try {
        const answer = await this.poll(queue, [...o.ids], o.ctl.signal, o.cursor);
        items = answer.items;
        // After a round with no end, the next reads every row again: whatever a cursor could
        // miss is found within a round.
        o.cursor = items.length ? answer.cursor : null;
      } catch {
        if (o.merged) return;
        // Refused or unreachable: each caller's single wait says so in its own words (and retries as it does).
        for (const id of o.ids) this.each(queue, id, (w) => w.alone());
        break;
      }
      if (o.merged) return;
      for (const item of items) {
        o.ids.delete(item.id);
        // A job its queue does not have (a stale hint): the single wait finds it where it is.
        if (item.state === undefined) this.each(queue, item.id, (w) => w.alone());
        else this.each(queue, item.id, (w) => w.answer(item));
      }
    }
    this.out.get(queue)?.delete(o);
  }

  /** Takes every waiter of `id` off and calls `fn` for each. */
  private each(queue: string, id: string, fn: (w: Waiter) => void): void {
    const ofQueue = this.waiting.get(queue);
    const ws = ofQueue?.get(id);
    if (!ofQueue || !ws) return;
    ofQueue.delete(id);
    if (!ofQueue.size) this.waiting.delete(queue);
    for (const w of ws) fn(w);
  }

  private drop(queue: string, w: Waiter): void {
    const ofQueue = this.waiting.get(queue);
    const ws = ofQueue?.get(w.id);
    if (!ofQueue || !ws) return;
    ws.delete(w);
    if (ws.size) return;
    ofQueue.delete(w.id);
    if (!ofQueue.size) this.waiting.delete(queue);
    // A request left with no job anyone awaits is called off.
    for (const o of this.out.get(queue) ?? []) {
      if (!o.ids.has(w.id)) continue;
      o.ids.delete(w.id);
      if (!o.ids.size) {
        o.merged = true;
        o.ctl.abort();
        this.out.get(queue)?.delete(o);
      }
    }
  }
}
