/**
 * The running job, for handlers: its id, attempt and AbortSignal (cancel, time limit, shutdown).
 * It is kept in an AsyncLocalStorage where the runtime has one (Node, Bun, Deno, Workers with
 * nodejs_compat), so concurrent jobs each see their own. Elsewhere (a browser) a job is current
 * from its start until it settles: right for a worker of concurrency 1.
 */

export interface JobContext {
  id: string;
  queue: string;
  attempt: number;
  /** Aborted when the job is cancelled, runs past its time limit, or loses its lease. */
  signal: AbortSignal;
  kwargs: Record<string, unknown>;
  traceparent: string | null;
  /** The application's correlation string from the envelope (SubmitCallOptions.origin). */
  origin: string | null;
  /**
   * Streams bytes (a string as UTF-8) to the journal as CHUNK frames, in order. Writes made
   * while a frame is on its way are coalesced into the next one, so many small writes cost few
   * rows. Throws if an earlier chunk could not be written (the lease was lost, say).
   */
  write(data: string | Uint8Array): void;
  /**
   * Logs a line: to stderr at once, and to the plane's lifecycle feed as a `worker` record
   * `{level, message, id, trace_id}` (best effort, batched: client/worker/logs.ts). Level: info.
   */
  log(message: string, level?: 'debug' | 'info' | 'warn' | 'error'): void;
}

interface Store {
  run<T>(ctx: JobContext, fn: () => T): T;
  getStore(): JobContext | undefined;
}

/** The fallback: the job whose handler started last and has not settled. */
function plainStore(): Store {
  let current: JobContext | undefined;
  return {
    run(ctx, fn) {
      current = ctx;
      const done = () => {
        if (current === ctx) current = undefined;
      };
      const out = fn();
      if (out instanceof Promise) out.then(done, done);
      else done();
      return out;
    },
    getStore: () => current,
  };
}

/**
 * The store, one for every copy of this module in a process. A process may hold two: the
 * `lakeshore` CLI is a bundle of its own, and the handlers its worker runs import the package (or
 * a checkout's sources); their `currentJob()` must find the job that the CLI's runtime runs.
 */
interface Shared {
  store: Store;
  loading: Promise<void> | null;
}
const SHARED = Symbol.for('lakeshore.job-context');
const shared: Shared = ((globalThis as { [SHARED]?: Shared })[SHARED] ??= { store: plainStore(), loading: null });

/** Uses AsyncLocalStorage where the runtime has it (runWorker calls this before its first job). */
export function loadJobContext(): Promise<void> {
  shared.loading ??= import('node:async_hooks').then(
    (m) => {
      shared.store = new m.AsyncLocalStorage<JobContext>();
    },
    () => {},
  );
  return shared.loading;
}

/** The running job, or null outside one. */
export const jobOrNull = (): JobContext | null => shared.store.getStore() ?? null;

const inherit = (job: JobContext) => job.origin;
let originFor: (job: JobContext) => string | null = inherit;

/**
 * Decides the `origin` of a job submitted from inside a running job without one of its own:
 * `fn(currentJob())` answers it. The default (and `null`) hands the running job's origin on.
 */
export function setOriginFor(fn: ((job: JobContext) => string | null) | null): void {
  originFor = fn ?? inherit;
}

/** The origin a job submitted inside `job` gets (null outside a job). */
export function originOf(job: JobContext | null): string | null {
  if (!job) return null;
  const out = originFor(job);
  if (out !== null && typeof out !== 'string') throw new TypeError(`originFor must answer a string or null, got ${typeof out}`);
  return out;
}

/** The job the calling handler is running for; throws outside a job. */
export function currentJob(): JobContext {
  const c = shared.store.getStore();
  if (!c) throw new Error('currentJob() called outside a lakeshore job');
  return c;
}

export const runInJob = <T>(ctx: JobContext, fn: () => T): T => shared.store.run(ctx, fn);
