/**
 * What a single writer knows of its queues' timing and settings, so a claim leaves out the
 * statements that cannot do anything: no lease expiry before the earliest lease runs out, no
 * promotion before the first delayed job is due, no TTL sweep before the first TTL, no pause, cap
 * or rate arithmetic on a queue that has none. Only the queue's Durable Object may keep these:
 * every change to its rows and settings goes through it. A hint is never later than the truth
 * (a write that makes something due sooner lowers it), so leaving a statement out is always safe;
 * an unknown queue runs them all. The local plane, where several processes share a file, keeps none.
 *
 * A read learned from may have missed writes of batches in flight with its own (committer.ts: the
 * store may apply them in either order). Each write that makes something sooner is told here only
 * after it committed, so a write the read missed is told after the read's plan was made: `learn`
 * takes the mark read when the plan was made and replays what was told since.
 */
import type { Wake } from './sql/wake.ts';
import type { QueueSettings } from './types.ts';

export interface Hints {
  /** The earliest lease deadline, earliest delayed job due, earliest TTL; null: none. */
  lease: number | null;
  due: number | null;
  ttl: number | null;
  paused: boolean;
  /** The queue has a running cap, a claim rate. */
  capped: boolean;
  rated: boolean;
}

const min = (a: number | null, b: number | null) => (a === null ? b : b === null ? a : Math.min(a, b));

/** What `sooner` was told, kept for replay: enough for the batches in flight together. */
const KEEP = 1024;

interface Told {
  mark: number;
  key: string;
  what: 'lease' | 'due' | 'ttl';
  at: number;
}

export class HintBook {
  private readonly known = new Map<string, Hints>();
  /** The last KEEP calls of `sooner`, oldest first; `marks` counts them all. */
  private readonly told: Told[] = [];
  private marks = 0;

  private static key = (ns: string, q: string) => `${ns}\u0000${q}`;

  get(ns: string, q: string): Hints | undefined {
    return this.known.get(HintBook.key(ns, q));
  }

  /** Read when a plan that reads the hints afresh is made; handed back to `learn`. */
  get mark(): number {
    return this.marks;
  }

  /**
   * All of it, read in one statement (wake.ts) by a plan made at `since` (this.mark): then what
   * `sooner` was told since, which that read may not have seen. When what was told since is no
   * longer kept, the queue is forgotten instead (its next claim runs every statement).
   */
  learn(ns: string, q: string, w: Wake, since: number): void {
    const key = HintBook.key(ns, q);
    if (since < (this.told[0]?.mark ?? 0) - 1) {
      this.known.delete(key);
      return;
    }
    const h: Hints = { lease: w.lease, due: w.due, ttl: w.ttl, paused: w.paused, capped: w.hasCap, rated: w.hasRate };
    for (let i = this.told.length - 1; i >= 0 && this.told[i]!.mark > since; i--) {
      const t = this.told[i]!;
      if (t.key === key) h[t.what] = min(h[t.what], t.at);
    }
    this.known.set(key, h);
  }

  /** A write made something due at `at` (a lease, a delayed job, a TTL): the hint moves no later than it. */
  sooner(ns: string, q: string, what: 'lease' | 'due' | 'ttl', at: number | null): void {
    if (at === null) return;
    const key = HintBook.key(ns, q);
    this.told.push({ mark: ++this.marks, key, what, at });
    if (this.told.length > KEEP) this.told.shift();
    const h = this.known.get(key);
    if (h) h[what] = min(h[what], at);
  }

  settings(ns: string, q: string, s: QueueSettings, paused: boolean): void {
    const h = this.get(ns, q);
    if (!h) return;
    h.paused = paused;
    h.capped = s.maxRunning !== null;
    h.rated = s.claimsPerSecond !== null;
  }

  /** Knows nothing of the queue any more: its next claim runs every statement and learns again. */
  forget(ns: string, q: string): void {
    this.known.delete(HintBook.key(ns, q));
  }

  paused(ns: string, q: string, paused: boolean): void {
    const h = this.get(ns, q);
    if (h) h.paused = paused;
  }
}
