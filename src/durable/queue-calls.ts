/**
 * How a queue object runs the calls made of it: each once the object has started on its shard
 * (shard-place.ts `prepare`), answered settled (core/settled.ts: error classes do not cross RPC),
 * with the bookmark of its shard it last wrote or read (bookmark.ts), and counted for the
 * benchmark. A call that may wait runs under an AbortSignal its caller may fire (call-offs.ts).
 */
import { settle } from '../core/settled.ts';
import { formatBookmark } from './bookmark.ts';
import type { CallOffs } from './call-offs.ts';
import type { D1Port } from './d1-port.ts';
import type { BatchCounters } from './queue-engine.ts';
import type { ShardPlace } from './shard-place.ts';

export class QueueCalls {
  private readonly place: ShardPlace;
  private readonly port: D1Port;
  private readonly rows: BatchCounters;
  private readonly callOffs: CallOffs;

  constructor(place: ShardPlace, port: D1Port, rows: BatchCounters, callOffs: CallOffs) {
    this.place = place;
    this.port = port;
    this.rows = rows;
    this.callOffs = callOffs;
  }

  /**
   * Runs one verb and answers it settled, counting calls for the benchmark. The object's first
   * verb finds its shard and starts it; while a move fences it, the verb first looks whether the
   * move has ended (shard-place.ts `prepare`).
   */
  run<T>(fn: () => Promise<T>) {
    const t0 = Date.now();
    return settle(this.place.ready ? fn : () => this.prepared(fn))
      .then((a) => {
        // The newest point of its shard this object has written (or read): the client's way to
        // read its own writes from a replica (bookmark.ts).
        const b = this.port.bookmark;
        return b && this.place.shard ? { ...a, bookmark: formatBookmark({ shard: this.place.shard, d1: b }) } : a;
      })
      .finally(() => {
        this.rows.calls++;
        this.rows.callMs += Date.now() - t0;
      });
  }

  /** Runs a verb that may wait, under an AbortSignal that abortWait(waitId) fires. */
  waiting<T>(waitId: string | undefined, fn: (signal: AbortSignal | undefined) => Promise<T>) {
    if (!waitId) return this.run(() => fn(undefined));
    const w = this.callOffs.begin(waitId);
    return this.run(() => fn(w.signal)).finally(w.end);
  }

  /**
   * A call that answers from the object's memory, once the object has started: any call but a
   * move's fence and unfence starts it (shard-place.ts `prepare`), as one that reads its rows does.
   */
  begun<T>(fn: () => T): T | Promise<T> {
    return this.place.ready ? fn() : this.prepared(fn);
  }

  /** Before a stream's fetch: null once the object has started, else the 503 its failed start answers. */
  async unready(): Promise<Response | null> {
    if (this.place.ready) return null;
    const s = await settle(() => this.place.prepare());
    return s.ok ? null : Response.json({ error: s.error }, { status: 503 });
  }

  /**
   * `fn` once the object has started (shard-place.ts `prepare`). Awaited here, not chained with
   * `then`: a promise `fn` answers already rejected (a verb's bad input) then has its handler at
   * once, where a `then` would adopt it a turn later and the runtime would call it unhandled.
   */
  private async prepared<T>(fn: () => T | Promise<T>): Promise<T> {
    await this.place.prepare();
    return await fn();
  }
}
