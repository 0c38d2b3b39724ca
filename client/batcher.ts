/**
 * Coalesces single calls into batch requests, like DataLoader: calls made in the same tick, and
 * calls made while earlier batches are in flight, go out together. Each caller still gets its
 * own answer or error.
 */
type Settled<O> = { ok: true; value: O } | { ok: false; error: Error };

interface Waiting<I, O> {
  item: I;
  resolve: (v: O) => void;
  reject: (e: Error) => void;
}

export class Batcher<I, O> {
  private pending: Waiting<I, O>[] = [];
  private inFlight = 0;
  private scheduled = false;
  readonly send: (items: I[]) => Promise<Settled<O>[]>;
  private readonly maxInFlight: number;
  private readonly maxBatch: number;

  constructor(send: (items: I[]) => Promise<Settled<O>[]>, opts: { maxInFlight?: number; maxBatch?: number } = {}) {
    this.send = send;
    this.maxInFlight = opts.maxInFlight ?? 2;
    this.maxBatch = opts.maxBatch ?? 500;
  }

  add(item: I): Promise<O> {
    return new Promise<O>((resolve, reject) => {
      this.pending.push({ item, resolve, reject });
      this.schedule();
    });
  }

  private schedule(): void {
    if (this.scheduled || this.inFlight >= this.maxInFlight || !this.pending.length) return;
    this.scheduled = true;
    queueMicrotask(() => {
      this.scheduled = false;
      void this.flush();
    });
  }

  private async flush(): Promise<void> {
    if (this.inFlight >= this.maxInFlight || !this.pending.length) return;
    const batch = this.pending.splice(0, this.maxBatch);
    this.inFlight++;
    try {
      const out = await this.send(batch.map((w) => w.item));
      batch.forEach((w, i) => {
        const r = out[i];
        if (!r) w.reject(new Error('the plane answered fewer results than it was sent'));
        else if (r.ok) w.resolve(r.value);
        else w.reject(r.error);
      });
    } catch (e) {
      for (const w of batch) w.reject(e instanceof Error ? e : new Error(String(e)));
    } finally {
      this.inFlight--;
      this.schedule();
    }
  }
}
