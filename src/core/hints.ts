/**
 * What a single writer knows of its queues' timing and settings, so a claim leaves out the
 * statements that cannot do anything: no lease expiry before the earliest lease runs out, no
 * promotion before the first delayed job is due, no TTL sweep before the first TTL, no pause, cap
 * or rate arithmetic on a queue that has none. Only the queue's Durable Object may keep these:
 * every change to its rows and settings goes through it. A hint is never later than the truth
 * (a write that makes something due sooner lowers it), so leaving a statement out is always safe;
 * an unknown queue runs them all. The local plane, where several processes share a file, keeps none.
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

export class HintBook {
  private readonly known = new Map<string, Hints>();

  private static key = (ns: string, q: string) => `${ns}\u0000${q}`;

  get(ns: string, q: string): Hints | undefined {
    return this.known.get(HintBook.key(ns, q));
  }

  /** All of it, read in one statement (wake.ts). */
  learn(ns: string, q: string, w: Wake): void {
    this.known.set(HintBook.key(ns, q), { lease: w.lease, due: w.due, ttl: w.ttl, paused: w.paused, capped: w.hasCap, rated: w.hasRate });
  }

  /** A write made something due at `at` (a lease, a delayed job, a TTL): the hint moves no later than it. */
  sooner(ns: string, q: string, what: 'lease' | 'due' | 'ttl', at: number | null): void {
    const h = this.get(ns, q);
    if (h && at !== null) h[what] = min(h[what], at);
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
