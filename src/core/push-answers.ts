/**
 * The bytes of receivers' answers the pusher (core/push.ts) holds at once. A queue object pushes
 * for its whole queue within an isolate's 128 MB, and 64 deliveries answered together with 1 MiB
 * results, or one batch of 100 such, would pass it. So a 2xx answer reserves its bytes (its
 * content-length, else all it may hold) before it is read, and keeps them until its jobs are
 * settled; past ANSWER_BYTES the next waits, its push timeout running, for one to finish. One
 * answer is always let through, and none may hold more than ANSWER_BYTES.
 */
export const ANSWER_BYTES = 8 << 20;

/**
 * A budget of units taken and given back: the bytes of answers being read (ANSWER_BYTES), or the
 * connections a runtime lets wait for headers (push-delivery.ts). One taker always gets through.
 */
export class Budget {
  private used = 0;
  private readonly waiting = new Set<() => void>();
  private readonly max: number;

  constructor(max = ANSWER_BYTES) {
    this.max = max;
  }

  /** The units reserved now. */
  get bytes(): number {
    return this.used;
  }

  /** Reserves `n` units once they fit beside the others' (at once when none are held); rejects once `signal` aborts. */
  async take(n: number, signal: AbortSignal): Promise<void> {
    while (this.used > 0 && this.used + n > this.max) {
      signal.throwIfAborted();
      await new Promise<void>((wake) => {
        const done = () => {
          this.waiting.delete(done);
          signal.removeEventListener('abort', done);
          wake();
        };
        this.waiting.add(done);
        signal.addEventListener('abort', done, { once: true });
      });
    }
    signal.throwIfAborted();
    this.used += n;
  }

  give(n: number): void {
    this.used -= n;
    for (const wake of [...this.waiting]) wake();
  }
}
