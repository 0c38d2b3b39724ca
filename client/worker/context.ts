/** The running job, for handlers: its id, attempt and AbortSignal (cancel, time limit, shutdown). */
import { AsyncLocalStorage } from 'node:async_hooks';

export interface JobContext {
  id: string;
  queue: string;
  attempt: number;
  /** Aborted when the job is cancelled, runs past its time limit, or loses its lease. */
  signal: AbortSignal;
  kwargs: Record<string, unknown>;
  traceparent: string | null;
  /**
   * Streams bytes (a string as UTF-8) to the journal as CHUNK frames, in order. Writes made
   * while a frame is on its way are coalesced into the next one, so many small writes cost few
   * rows. Throws if an earlier chunk could not be written (the lease was lost, say).
   */
  write(data: string | Uint8Array): void;
}

const store = new AsyncLocalStorage<JobContext>();

/** The job the calling handler is running for; throws outside a job. */
export function currentJob(): JobContext {
  const c = store.getStore();
  if (!c) throw new Error('currentJob() called outside a lakeshore job');
  return c;
}

export const runInJob = <T>(ctx: JobContext, fn: () => T): T => store.run(ctx, fn);
