/**
 * A handler's log lines (`currentJob().log(...)`): each goes to stderr at once, and to the plane's
 * feed in batches, best effort: a batch goes out when LOG_BATCH lines wait or LOG_FLUSH_MS after
 * the first, one call per queue; a failed call is dropped (stderr has the lines), and past
 * LOG_BUFFER waiting lines the oldest are dropped, so a plane that is away costs the worker no
 * memory and no retries.
 */
import type { LogLevel, LogLine } from '../../src/core/feed.ts';
import type { DispatchPlane } from '../types.ts';

export const LOG_FLUSH_MS = 200;
export const LOG_BATCH = 100;
export const LOG_BUFFER = 1_000;

export class LogShipper {
  private readonly waiting: { queue: string; line: LogLine }[] = [];
  private timer: ReturnType<typeof setTimeout> | null = null;
  private sending: Promise<void> = Promise.resolve();
  /** Lines that did not reach the plane (dropped from a full buffer, or in a failed call). */
  dropped = 0;
  private readonly d: DispatchPlane;
  private readonly workerId: string;

  constructor(d: DispatchPlane, workerId: string) {
    this.d = d;
    this.workerId = workerId;
  }

  /** A line of the job `id` of `queue`: to stderr now, to the feed soon. */
  log(queue: string, id: string, level: LogLevel, message: string, traceId: string | null): void {
    console.error(`[${queue}/${id}] ${level}: ${message}`);
    this.waiting.push({ queue, line: { id, level, message, trace_id: traceId, at: Date.now() } });
    if (this.waiting.length > LOG_BUFFER) this.dropped += this.waiting.splice(0, this.waiting.length - LOG_BUFFER).length;
    if (this.waiting.length >= LOG_BATCH) void this.flush();
    else this.timer ??= setTimeout(() => void this.flush(), LOG_FLUSH_MS);
  }

  /** Sends what waits (and waits for it); runWorker calls it as it stops. */
  flush(): Promise<void> {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    const batch = this.waiting.splice(0, this.waiting.length);
    if (!batch.length) return this.sending;
    const byQueue = new Map<string, LogLine[]>();
    for (const { queue, line } of batch) byQueue.set(queue, [...(byQueue.get(queue) ?? []), line]);
    const send = async () => {
      for (const [queue, lines] of byQueue) {
        for (let i = 0; i < lines.length; i += LOG_BATCH) {
          const part = lines.slice(i, i + LOG_BATCH);
          await this.d.workerLog(queue, this.workerId, part).catch(() => (this.dropped += part.length));
        }
      }
    };
    // Calls go out one after another, so the feed tells a worker's lines in order.
    this.sending = this.sending.then(send);
    return this.sending;
  }
}
