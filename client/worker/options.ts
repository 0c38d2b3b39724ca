/** What a worker is told: runWorker's options, and the defaults the contract gives them. */
import { checkOptions } from '../check-options.ts';
import type { DispatchPlane } from '../types.ts';
import type { JobOutcome, OnDone } from './job.ts';
import type { Registry } from './resolve.ts';

export interface WorkerOptions {
  dispatch?: DispatchPlane;
  /** Functions by name. Looked up before any import. */
  registry?: Registry;
  /** Directory that `module#export` imports resolve under. Default: the current directory. */
  root?: string;
  /**
   * Run at most one job, then return: on an empty queue it waits `onceWaitMs` (default 2 s) for
   * one, then returns 0, so it works from cron and in tests.
   */
  once?: boolean;
  onceWaitMs?: number;
  concurrency?: number;
  /**
   * A failed job is retried while attempt <= retries: retries + 1 attempts where neither the job
   * nor its queue sets a budget (sent with each nack), and never past the job's or its queue's
   * when one does. Default: the plane's budget alone (the job's max_attempts, else its queue's,
   * else 3), failing the job once it is spent (AttemptsExhausted).
   */
  retries?: number;
  /** Aborting it stops the worker gracefully: no more claims, running jobs given `graceMs` to end. */
  stop?: AbortSignal;
  /**
   * Aborting it stops the worker now (a second Ctrl-C, say): no more claims, and every running
   * job aborted as at the grace's end, back to its queue by its nack (retried within its budget).
   */
  stopNow?: AbortSignal;
  /** Let envelopes name modules to import. Default: on for the local plane, off over HTTP. */
  allowImport?: boolean;
  /**
   * 'mount': run jobs that carry a producer's pushed code (docs/code-mount.md): fetch the stamp's
   * archive once, check it, unpack it under `codeHome` (default $LAKESHORE_HOME/code) and import
   * the job's module from it. Off by default: running pushed code is running the producer's code.
   */
  code?: 'mount' | 'off';
  codeHome?: string;
  workerId?: string;
  /**
   * The time limit of a job whose envelope and queue set none: past it the job is aborted and
   * fails with TimeLimitExceeded. Default 600 s (the contract's); 0: none.
   */
  timeLimitMs?: number;
  leaseMs?: number;
  heartbeatMs?: number;
  graceMs?: number;
  /** How long one claim waits for work. Default 20 s. */
  claimWaitMs?: number;
  /**
   * Extra jobs to claim ahead of free slots: a number, or 'auto' (default) to size it by the
   * pace of this worker's jobs times the claim round trip (see prefetch.ts). 0 claims only what
   * can start now.
   */
  prefetch?: number | 'auto';
  onJob?: (id: string, outcome: JobOutcome, attempt: number) => void;
  /**
   * Sees each attempt's outcome. A failure is told as its handler ends, before the nack, and may
   * be answered 'handled': the job fails without a retry, the application having recorded the
   * failure as a fact instead of retrying a side effect. A success is told once the plane has
   * taken the ack; a result the plane refuses is told as the failure it becomes, a lost ack not at
   * all (docs/contract.md, "Traces and the done hook").
   */
  onDone?: OnDone;
  log?: (msg: string) => void;
}

/** Every option runWorker takes. A record of the interface's keys, so the compiler keeps it whole. */
const KNOWN: Record<keyof WorkerOptions, true> = {
  dispatch: true,
  registry: true,
  root: true,
  once: true,
  onceWaitMs: true,
  concurrency: true,
  retries: true,
  stop: true,
  stopNow: true,
  allowImport: true,
  code: true,
  codeHome: true,
  workerId: true,
  timeLimitMs: true,
  leaseMs: true,
  heartbeatMs: true,
  graceMs: true,
  claimWaitMs: true,
  prefetch: true,
  onJob: true,
  onDone: true,
  log: true,
};

/** What an unknown option most likely meant: other libraries' words, and the Python worker's. */
const MEANT: Record<string, keyof WorkerOptions> = {
  handlers: 'registry',
  functions: 'registry',
  fns: 'registry',
  signal: 'stop',
  abortSignal: 'stop',
  slots: 'concurrency',
  workers: 'concurrency',
  timeout: 'timeLimitMs',
  timeoutMs: 'timeLimitMs',
  time_limit_ms: 'timeLimitMs',
  lease_ms: 'leaseMs',
  worker_id: 'workerId',
  allow_import: 'allowImport',
  on_done: 'onDone',
  maxRetries: 'retries',
};

/** Refuses options runWorker does not take (check-options.ts). */
export function checkWorkerOptions(opts: unknown): asserts opts is WorkerOptions {
  checkOptions('runWorker(queues, options)', opts, KNOWN, MEANT);
}

/** How long `once` waits for a job on an empty queue before it returns 0. */
export const ONCE_WAIT_MS = 2_000;

/** A job's time limit when its envelope, its queue and its worker set none (the contract's 600 s). */
export const DEFAULT_TIME_LIMIT_MS = 600_000;
