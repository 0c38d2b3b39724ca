/**
 * Parked callers: long-poll claims, result waits, journal readers. They live in memory and are
 * woken by the transition that can satisfy them; on waking they re-read the rows, which stay the
 * only truth. A wake is a hint, never a hand-over of state.
 */
interface Waiter {
  wake: (woken: boolean) => void;
  /** What the waiter carries, e.g. a parked claim that a submit can hand rows to. */
  data?: unknown;
}

export class Waiters {
  private readonly byKey = new Map<string, Waiter[]>();

  /** Resolves true when woken, false when `ms` passed or `signal` aborted first. */
  wait(key: string, ms: number, signal?: AbortSignal, data?: unknown): Promise<boolean> {
    if (ms <= 0 || signal?.aborted) return Promise.resolve(false);
    return new Promise<boolean>((resolve) => {
      let timer: ReturnType<typeof setTimeout> | undefined;
      const onAbort = () => w.wake(false);
      const w: Waiter = {
        data,
        wake: (woken) => {
          if (timer !== undefined) clearTimeout(timer);
          signal?.removeEventListener('abort', onAbort);
          this.remove(key, w);
          resolve(woken);
        },
      };
      const list = this.byKey.get(key);
      if (list) list.push(w);
      else this.byKey.set(key, [w]);
      timer = setTimeout(() => w.wake(false), ms);
      signal?.addEventListener('abort', onAbort, { once: true });
    });
  }

  /** The waiters of `key` that carry data, oldest first, with a way to wake each. */
  carrying<T>(key: string, accept: (d: unknown) => d is T): { data: T; wake: () => void }[] {
    return (this.byKey.get(key) ?? []).flatMap((w) => (accept(w.data) ? [{ data: w.data, wake: () => w.wake(true) }] : []));
  }

  /** Wakes up to `n` waiters of `key`, oldest first. */
  wake(key: string, n = Infinity): void {
    const list = this.byKey.get(key);
    if (!list) return;
    for (const w of list.slice(0, n)) w.wake(true);
  }

  /** Wakes every waiter (e.g. another process changed the database). */
  wakeAll(): void {
    for (const key of [...this.byKey.keys()]) this.wake(key);
  }

  get size(): number {
    let n = 0;
    for (const l of this.byKey.values()) n += l.length;
    return n;
  }

  private remove(key: string, w: Waiter): void {
    const list = this.byKey.get(key);
    if (!list) return;
    const i = list.indexOf(w);
    if (i >= 0) list.splice(i, 1);
    if (!list.length) this.byKey.delete(key);
  }
}

/** A key claims park on (keys.queue, keys.capped). */
export const isClaimKey = (key: string) => key.startsWith('q\u0000') || key.startsWith('c\u0000');

export const keys = {
  queue: (ns: string, queue: string) => `q\u0000${ns}\u0000${queue}`,
  /** Claims held back by the queue's running cap. */
  capped: (ns: string, queue: string) => `c\u0000${ns}\u0000${queue}`,
  inv: (ns: string, id: string) => `i\u0000${ns}\u0000${id}`,
  journal: (ns: string, id: string) => `j\u0000${ns}\u0000${id}`,
};
