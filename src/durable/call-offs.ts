/**
 * A queue object's waits that their caller may call off (QueueObject.abortWait), by the caller's
 * wait id: when a client goes away, the Worker tells the object, and
 * - a wait in progress (a parked claim, a result wait, a journal read) is aborted: a parked claim
 *   leaves the queue before it can take a job;
 * - a claim answered in the last HANDED_MS gives its jobs back at once (its answer may never have
 *   reached the client);
 * - a call-off that overtook its claim is remembered for HANDED_MS, and the claim, when it
 *   arrives, leaves at once with nothing.
 */
import type { Claimed } from '../core/types.ts';

/**
 * How long a claim's answer is remembered for a late call-off. A client that left while the
 * answer was on its way is learned of within milliseconds; a client that left after receiving it
 * no longer has a request to abort.
 */
const HANDED_MS = 5_000;

type Held = { id: string; attempt: number }[];

/** Drops a map's entries older than HANDED_MS; insertion order is age order. */
function forgetOld<V>(m: Map<string, V>, at: (v: V) => number) {
  const old = Date.now() - HANDED_MS;
  for (const [k, v] of m) {
    if (at(v) > old) break;
    m.delete(k);
  }
}

export class CallOffs {
  /** Waits in progress, by wait id. */
  private readonly waits = new Map<string, AbortController>();
  /** Claims answered in the last HANDED_MS, by wait id. */
  private readonly handed = new Map<string, { workerId: string; items: Held; at: number }>();
  /** Wait ids called off before their claim arrived, for HANDED_MS. */
  private readonly calledOff = new Map<string, number>();
  private readonly release: (workerId: string, items: Held) => Promise<unknown>;

  /** `release`: puts a worker's claimed attempts back in the queue (Work.release). */
  constructor(release: (workerId: string, items: Held) => Promise<unknown>) {
    this.release = release;
  }

  /** Whether this wait was called off before it arrived (it then leaves at once, with nothing). */
  overtaken(waitId: string): boolean {
    return this.calledOff.delete(waitId);
  }

  /** A wait begins: its signal fires if it is called off; `end` once it has answered. */
  begin(waitId: string): { signal: AbortSignal; end: () => void } {
    const ac = new AbortController();
    this.waits.set(waitId, ac);
    return { signal: ac.signal, end: () => this.waits.delete(waitId) };
  }

  /** Claimed jobs on their way to a caller: kept a moment by wait id, or put back if it already left. */
  async handing(workerId: unknown, waitId: string | undefined, signal: AbortSignal | undefined, got: Claimed[]): Promise<Claimed[]> {
    if (!waitId || !got.length || typeof workerId !== 'string') return got;
    const items = got.map((c) => ({ id: c.id, attempt: c.attempt }));
    if (signal?.aborted) {
      await this.release(workerId, items);
      return [];
    }
    this.handed.set(waitId, { workerId, items, at: Date.now() });
    forgetOld(this.handed, (h) => h.at);
    return got;
  }

  /** Calls the wait off (see above); false if there was nothing to call off. */
  async callOff(waitId: string): Promise<boolean> {
    const w = this.waits.get(waitId);
    if (w) {
      w.abort();
      return true;
    }
    const h = this.handed.get(waitId);
    if (!h) {
      this.calledOff.set(waitId, Date.now());
      forgetOld(this.calledOff, (at) => at);
      return false;
    }
    this.handed.delete(waitId);
    await this.release(h.workerId, h.items);
    return true;
  }
}
