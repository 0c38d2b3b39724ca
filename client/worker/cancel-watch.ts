/**
 * Hears a running job's cancel as it happens, not at its next heartbeat (every third of the lease,
 * 10 s by default): for the jobs that have run a while, the worker holds one wait on their results
 * a queue (`results`, answered as soon as one of them ends), and a job the answer says was
 * cancelled is aborted at once. A job that ends within `afterMs` costs nothing: most jobs are short,
 * and their heartbeat would not have come yet either. A plane or token that does not take the wait
 * (an older plane, a token without the right) leaves the heartbeats to tell, as before.
 */
import { type Ended, ForbiddenError, InvocationCancelledError, UnauthorizedError } from '../errors.ts';
import type { DispatchPlane } from '../types.ts';

const NOTHING = () => {};

/** How long a wait is held before it is asked again (ms). */
const WAIT_MS = 30_000;
/** A new job joins the held wait no sooner than this after the wait began (ms): one request for a burst of starts. */
const REJOIN_MS = 250;
/** After a failed wait (the plane away), the next one (ms). */
const AGAIN_MS = 1_000;

interface Watching {
  /** The jobs watched, each with its abort. */
  readonly ids: Map<string, () => void>;
  /** The wait in flight, aborted when a job joins (to ask for it too) or none is left. */
  ctl: AbortController | null;
  /** The jobs the wait in flight asks about. */
  asked: Set<string>;
  startedAt: number;
  rejoin: ReturnType<typeof setTimeout> | null;
  running: boolean;
}

/** A job not yet watched: it joins its queue's wait once it has run `afterMs`, unless it ended first. */
interface Pending {
  readonly queue: string;
  readonly id: string;
  readonly cancelled: () => void;
  readonly at: number;
  w: Watching | null;
  gone: boolean;
}

export class CancelWatch {
  private readonly queues = new Map<string, Watching>();
  /** Jobs in the order they started (so in the order they join), from `head` on; one timer for all. */
  private pending: Pending[] = [];
  private head = 0;
  private timer: ReturnType<typeof setTimeout> | null = null;
  private off = false;
  private closed = false;
  private readonly d: DispatchPlane;
  private readonly afterMs: number;

  constructor(d: DispatchPlane, afterMs = 1_000) {
    this.d = d;
    this.afterMs = afterMs;
  }

  /** Watches a job that starts now; `cancelled` runs once if it is cancelled. Answers how to stop watching. */
  watch(queue: string, id: string, cancelled: () => void): () => void {
    if (this.off || this.closed) return NOTHING;
    const p: Pending = { queue, id, cancelled, at: performance.now() + this.afterMs, w: null, gone: false };
    this.pending.push(p);
    if (!this.timer) this.arm(p.at);
    return () => this.leave(p);
  }

  private leave(p: Pending): void {
    p.gone = true;
    const w = p.w;
    // The job's entry, not a later attempt's of the same job that took its place.
    if (!w || w.ids.get(p.id) !== p.cancelled) return;
    w.ids.delete(p.id);
    // None left: the wait in flight is called off, so it holds no request open.
    if (!w.ids.size) w.ctl?.abort();
  }

  private arm(at: number): void {
    this.timer = setTimeout(() => this.due(), Math.max(0, at - performance.now()));
    // The timer must not keep a process alive that has nothing else to do.
    (this.timer as { unref?: () => void }).unref?.();
  }

  /** Joins the jobs that have run `afterMs` to their queues' waits. */
  private due(): void {
    this.timer = null;
    if (this.off || this.closed) return;
    const now = performance.now() + 1; // a timer may fire a fraction early
    while (this.head < this.pending.length && this.pending[this.head]!.at <= now) {
      const p = this.pending[this.head++]!;
      if (!p.gone) this.join(p);
    }
    if (this.head > 1024) {
      this.pending = this.pending.slice(this.head);
      this.head = 0;
    }
    if (this.head < this.pending.length) this.arm(this.pending[this.head]!.at);
  }

  private join(p: Pending): void {
    let w = this.queues.get(p.queue);
    if (!w) {
      w = { ids: new Map(), ctl: null, asked: new Set(), startedAt: 0, rejoin: null, running: false };
      this.queues.set(p.queue, w);
    }
    p.w = w;
    w.ids.set(p.id, p.cancelled);
    this.kick(p.queue, w);
  }

  /** Ends every wait (the worker returns). */
  close(): void {
    this.closed = true;
    if (this.timer) clearTimeout(this.timer);
    this.pending = [];
    for (const w of this.queues.values()) {
      if (w.rejoin) clearTimeout(w.rejoin);
      w.ctl?.abort();
    }
    this.queues.clear();
  }

  /** Starts the queue's wait, or has the one in flight asked again with the jobs that joined it. */
  private kick(queue: string, w: Watching): void {
    if (!w.running) {
      w.running = true;
      void this.run(queue, w);
      return;
    }
    if (w.rejoin) return;
    const wait = Math.max(0, w.startedAt + REJOIN_MS - Date.now());
    w.rejoin = setTimeout(() => {
      w.rejoin = null;
      if ([...w.ids.keys()].some((id) => !w.asked.has(id))) w.ctl?.abort();
    }, wait);
    w.rejoin.unref?.();
  }

  private async run(queue: string, w: Watching): Promise<void> {
    try {
      while (w.ids.size && !this.closed) {
        w.asked = new Set(w.ids.keys());
        w.ctl = new AbortController();
        w.startedAt = Date.now();
        let ended: Ended[];
        try {
          ended = await this.d.results(queue, [...w.asked], { timeoutMs: WAIT_MS, signal: w.ctl.signal });
        } catch (e) {
          if (w.ctl.signal.aborted) continue; // a job joined, or none is left
          if (e instanceof ForbiddenError || e instanceof UnauthorizedError) {
            this.off = true; // this token may not wait on results: the heartbeats tell, as before
            return;
          }
          await new Promise((r) => setTimeout(r, AGAIN_MS).unref?.());
          continue;
        }
        for (const e of ended) {
          const abort = w.ids.get(e.id);
          if (!abort) continue; // it left already (its own ack ended it)
          w.ids.delete(e.id);
          if (!e.ok && e.error instanceof InvocationCancelledError) abort();
          // Ended otherwise while this worker runs it: its lease was lost; the heartbeat tells.
        }
      }
    } finally {
      w.running = false;
      w.ctl = null;
      if (this.queues.get(queue) === w && !w.ids.size) this.queues.delete(queue);
    }
  }
}
