/**
 * The queues of jobs a client awaits without knowing them (ids another process submitted, read
 * back from a file or a database), so their waits can be shared (result-waits.ts) rather than a
 * connection each. The ids awaited in one tick are looked up together, 1,000 a request
 * (`POST /invocations/get`). A few awaited at once (fewer than FEW) are not looked up: each waits
 * alone, in one request, as before.
 */

/** The most ids one look-up carries (the plane's batch limit). */
export const MAX_IDS = 1000;
/** Fewer hint-less waits than this in a tick wait alone: a look-up would only add a round trip. */
export const FEW = 4;

/** The queue of each of `ids` (null where the plane has no such job), in their order. */
export type Lookup = (ids: string[]) => Promise<(string | null)[]>;

export class Locator {
  private pending = new Map<string, ((queue: string | null) => void)[]>();
  private scheduled = false;
  private readonly lookup: Lookup;

  constructor(lookup: Lookup) {
    this.lookup = lookup;
  }

  /** The queue of `id`, from the look-up of this tick's ids; null when it waits alone (few, not found, or the look-up failed). */
  queueOf(id: string): Promise<string | null> {
    return new Promise((resolve) => {
      const waiting = this.pending.get(id);
      if (waiting) waiting.push(resolve);
      else this.pending.set(id, [resolve]);
      if (this.scheduled) return;
      this.scheduled = true;
      queueMicrotask(() => void this.flush());
    });
  }

  private async flush(): Promise<void> {
    this.scheduled = false;
    const batch = this.pending;
    this.pending = new Map();
    const ids = [...batch.keys()];
    const settle = (part: string[], queues: (string | null)[]) =>
      part.forEach((id, k) => {
        for (const resolve of batch.get(id) ?? []) resolve(queues[k] ?? null);
      });
    if (ids.length < FEW) return settle(ids, []);
    const parts: string[][] = [];
    for (let i = 0; i < ids.length; i += MAX_IDS) parts.push(ids.slice(i, i + MAX_IDS));
    await Promise.all(
      parts.map((part) =>
        this.lookup(part).then(
          (queues) => settle(part, queues),
          () => settle(part, []), // each wait says what went wrong on its own
        ),
      ),
    );
  }
}
