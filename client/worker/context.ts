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
}

const store = new AsyncLocalStorage<JobContext>();

/** The job the calling handler is running for; throws outside a job. */
export function currentJob(): JobContext {
  const c = store.getStore();
  if (!c) throw new Error('currentJob() called outside a lakeshore job');
  return c;
}

export const runInJob = <T>(ctx: JobContext, fn: () => T): T => store.run(ctx, fn);
