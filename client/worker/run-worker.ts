/**
 * runWorker: claims from one or more pools and runs what it claims, `concurrency` at a time.
 * It claims with waits (the plane wakes it when work arrives), never a tight poll. On `stop` it
 * claims no more, lets running jobs finish for up to `graceMs`, then aborts them.
 */
import { defaultDispatch } from '../default.ts';
import { loadJobContext } from './context.ts';
import type { Claimed, DispatchPlane } from '../types.ts';
import { LakeshoreError, TimeoutError } from '../errors.ts';
import { HardStop, runJob, type JobOutcome, type OnDone } from './job.ts';
import { Prefetch } from './prefetch.ts';
import { LogShipper } from './logs.ts';
import type { Mounts } from './mount.ts';
import { ACKS_WAIT_MS } from '../../src/core/limits.ts';
import type { Registry } from './resolve.ts';
import { randomId } from '../ids.ts';
import { CLIENT_VERSION } from '../version.ts';

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
   * Lowers the plane's attempt budget: a failed job is retried while attempt <= retries. Default:
   * no lower cap; the plane retries within the job's budget (its own max_attempts, else its
   * queue's, else 3) and fails it once the budget is spent (AttemptsExhausted).
   */
  retries?: number;
  /** Aborting it stops the worker gracefully. */
  stop?: AbortSignal;
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
   * Sees each job's outcome as its handler ends (before the ack or nack). For a failure it may
   * answer 'handled': the job fails without a retry, the application having recorded the failure
   * as a fact instead of retrying a side effect.
   */
  onDone?: OnDone;
  log?: (msg: string) => void;
}

/** How long `once` waits for a job on an empty queue before it returns 0. */
export const ONCE_WAIT_MS = 2_000;

/** The most one claim asks for (the plane's default batch limit). */
const MAX_CLAIM = 1000;
/** How often a worker's claims carry who it is. */
const INFO_EVERY_MS = 30_000;

/** This host and process, for worker ids: `host:pid` where the runtime has them. */
async function hostName(): Promise<string> {
  const pid = (globalThis as { process?: { pid?: number } }).process?.pid;
  const host = await import('node:os').then((os) => os.hostname(), () => 'worker');
  return pid === undefined ? host : `${host}:${pid}`;
}

/** The code cache of a worker that mounts pushed code (worker/mount.ts), fetching from its plane. */
async function mountsFor(d: DispatchPlane, home?: string): Promise<Mounts> {
  const fetchCode = (d as { fetchCode?: (stamp: string) => Promise<{ bytes: Uint8Array; sha256: string | null }> }).fetchCode;
  if (typeof fetchCode !== 'function') throw new Error("code: 'mount' needs an HTTP plane: pushed code lives there (a local plane runs this machine's code)");
  const [{ Mounts }, { join }, { homedir }] = await Promise.all([import('./mount.ts'), import('node:path'), import('node:os')]);
  const env = (globalThis as { process?: { env: Record<string, string | undefined> } }).process?.env ?? {};
  return new Mounts((stamp) => fetchCode.call(d, stamp), home ?? join(env.LAKESHORE_HOME || join(homedir(), '.lakeshore'), 'code'));
}

/** Runs until `stop` (or one job with `once`); answers the number of jobs it executed. */
export async function runWorker(queues: string | string[], opts: WorkerOptions = {}): Promise<number> {
  const pools = (Array.isArray(queues) ? queues : [queues]).filter(Boolean);
  if (!pools.length) throw new Error('runWorker needs at least one queue');
  const d = opts.dispatch ?? defaultDispatch();
  const workerId = opts.workerId ?? `${await hostName()}:${randomId().slice(0, 8)}`;
  await loadJobContext();
  const concurrency = Math.max(1, opts.concurrency ?? 1);
  const stop = opts.stop ?? new AbortController().signal;
  const hard = new HardStop();
  const log = opts.log ?? (() => {});
  const leaseMs = opts.leaseMs ?? null;
  // Acks of finished jobs wait here for the next claim on their queue and go with it (one
  // request, one storage batch). When the worker is not about to claim, they go on their own.
  const acks: { c: Claimed; result: Uint8Array; done: (e: Error | null) => void }[] = [];
  let claiming = true;
  const ackAlone = (c: Claimed, result: Uint8Array) => d.ack(c.id, workerId, { attempt: c.attempt, result });
  const sendAcks = () => {
    for (const a of acks.splice(0)) ackAlone(a.c, a.result).then(() => a.done(null), (e: unknown) => a.done(e instanceof Error ? e : new Error(String(e))));
  };
  const ack = (c: Claimed, result: Uint8Array) => {
    if (!claiming) return ackAlone(c, result);
    return new Promise<void>((resolve, reject) => {
      acks.push({ c, result, done: (e) => (e ? reject(e) : resolve()) });
      kick();
    });
  };
  const jobOpts = {
    dispatch: d, ack, workerId, registry: opts.registry ?? {}, root: opts.root ?? process.cwd(),
    allowImport: opts.allowImport ?? d.inProcess === true, retries: opts.retries ?? Infinity, timeLimitMs: opts.timeLimitMs ?? null,
    heartbeatMs: opts.heartbeatMs ?? Math.max(200, Math.floor((leaseMs ?? 30_000) / 3)), leaseMs, hardStop: hard, log, onDone: opts.onDone,
    logs: new LogShipper(d, workerId),
    mounts: opts.code === 'mount' ? await mountsFor(d, opts.codeHome) : null,
  };
  let executed = 0;
  let claimedOnce = false;
  let onceTries = 0;
  let gaveUp = false;
  const claimWait = opts.claimWaitMs ?? 20_000;
  // Who this worker is rides its first claim, and one every INFO_EVERY_MS after (the plane lists it).
  const proc = (globalThis as { process?: { pid?: number } }).process;
  const info = { queues: pools, host: (await hostName()).split(':')[0], pid: proc?.pid, version: CLIENT_VERSION, concurrency };
  let infoAt = 0;

  // Claims fill free capacity in batches (claimMany): a busy worker costs one round trip per
  // batch of jobs, not one per job. Up to two claims are in flight at once, each holding the
  // capacity it asked for. With `prefetch`, claimed jobs may wait in a local buffer (their lease
  // running) so the next batch is at hand when a job ends: worth it for short jobs, not long ones.
  const running = new Set<Promise<void>>();
  const claims = new Set<Promise<void>>();
  const buffer: Awaited<ReturnType<typeof d.claimMany>> = [];
  const prefetch = new Prefetch(opts.prefetch ?? 'auto', 2 * MAX_CLAIM);
  const capacity = () => (opts.once ? 1 : concurrency + prefetch.depth(leaseMs ?? 30_000));
  let held = 0; // claimed (running or buffered) plus asked for
  let active = 0; // handlers running; a job whose ack is still in flight no longer counts
  let acking = 0; // finished handlers whose ack or nack is still on its way
  let turn = 0;
  let backlog = false; // the last claim came back with all it asked for
  let kick = () => {};
  const start = () => {
    while (active < concurrency && buffer.length) {
      const c = buffer.shift()!;
      if (c.leaseUntil <= Date.now()) {
        // Its lease ran out while it waited here: the plane hands it out again; do not run it twice,
        // and claim less far ahead.
        held--;
        prefetch.overshot();
        continue;
      }
      active++;
      let freed = false;
      const free = () => {
        if (freed) return;
        freed = true;
        prefetch.jobDone();
        active--;
        held--;
        start();
        kick();
      };
      // A finished handler frees its slot while its ack is on the way, but only while fewer acks
      // are than the claim window holds: if the plane is slow or away, jobs wait for their acks
      // instead of piling up (each still holding a lease and sending heartbeats).
      let early = false;
      const handlerDone = () => {
        if (acking >= capacity()) return;
        acking++;
        early = true;
        free();
      };
      // One promise a job, not a chain of three: a worker's cost a job is mostly what it allocates.
      let job: Promise<void> | null = null;
      job = (async () => {
        try {
          const outcome = await runJob(c, jobOpts, handlerDone);
          opts.onJob?.(c.id, outcome, c.attempt);
        } catch (e) {
          log(`job ${c.id}: ${e instanceof Error ? e.message : String(e)}`);
        } finally {
          if (early) acking--;
          free();
          if (job) running.delete(job);
        }
      })();
      running.add(job);
    }
    prefetch.busy(buffer.length > 0 || active >= concurrency, active === 0 && buffer.length === 0);
  };
  const claimInto = async (want: number) => {
    const pool = pools[turn++ % pools.length]!;
    // With several pools, wait briefly on each in turn; with one, wait long; once, not long at all.
    const waitMs = opts.once ? Math.max(0, Math.floor((opts.onceWaitMs ?? ONCE_WAIT_MS) / pools.length)) : pools.length === 1 ? claimWait : Math.min(claimWait, 1_000);
    let got: Claimed[] = [];
    // Acks ride a claim only while work flows (a claim with acks waits at most ACKS_WAIT_MS, then
    // the worker must claim again); a worker that waits for each job sends them alone.
    const riding: typeof acks = [];
    if (prefetch.jobsWithin(ACKS_WAIT_MS) >= 2) {
      const stay: typeof acks = [];
      for (const a of acks) (a.c.queue === pool && riding.length < MAX_CLAIM ? riding : stay).push(a);
      acks.splice(0, acks.length, ...stay);
    }
    try {
      const t0 = performance.now();
      const now = Date.now();
      const worker = now - infoAt >= INFO_EVERY_MS ? ((infoAt = now), info) : undefined;
      const claimOpts = { waitMs, leaseMs: leaseMs ?? undefined, signal: stop, worker };
      if (riding.length) {
        const out = await d.ackAndClaim(pool, workerId, riding.map((a) => ({ id: a.c.id, attempt: a.c.attempt, result: a.result })), want, claimOpts);
        riding.forEach((a, i) => a.done(out.acks[i] ?? null));
        got = out.claimed;
      } else got = await d.claimMany(pool, workerId, want, claimOpts);
      if (got.length === want) prefetch.claimTook(performance.now() - t0); // a claim that waited for work says nothing of the round trip
      backlog = got.length === want;
    } catch (e) {
      for (const a of riding) a.done(e instanceof Error ? e : new Error(String(e)));
      // A refusal (bad token, wrong role, bad request) stops the worker; a plane that is away
      // or busy does not: say so, wait a little, and let the loop claim again.
      if (e instanceof LakeshoreError && !e.retryable && !(e instanceof TimeoutError)) throw e;
      if (!stop.aborted) {
        log(`claim on ${pool} failed: ${e instanceof Error ? e.message : String(e)}; retrying`);
        await new Promise((r) => setTimeout(r, 1_000));
      }
    } finally {
      held -= want - got.length;
    }
    claimedOnce ||= got.length > 0;
    if (opts.once && ++onceTries >= pools.length) gaveUp = true; // every pool asked once: nothing came
    executed += got.length;
    buffer.push(...got);
    start();
  };
  const claimer = async () => {
    while (!stop.aborted && !(opts.once && (claimedOnce || gaveUp))) {
      const cap = capacity();
      // A second claim in flight only while the queue has a backlog (the last claim came back
      // full: with none, two claims would both wait and each submit would wake one, a request
      // and a D1 batch more per few jobs), and only once half the window is free: one sent for
      // the first few slots that free up comes back with a few jobs, and until it does the worker
      // may not claim the rest (at 57 ms a claim, 326 jobs a claim instead of ~1,000).
      if (held < cap && (claims.size === 0 || (claims.size === 1 && backlog && !opts.once && cap - held >= cap / 2))) {
        const want = Math.min(MAX_CLAIM, cap - held);
        held += want;
        const p: Promise<void> = claimInto(want).finally(() => claims.delete(p));
        claims.add(p);
        continue;
      }
      // Not claiming now: acks waiting for a claim go on their own.
      sendAcks();
      // Let jobs finishing in the same turn free their capacity together before claiming again.
      await Promise.race([new Promise<void>((r) => (kick = r)), ...claims]);
      await new Promise((r) => setImmediate(r));
    }
    await Promise.all(claims);
    claiming = false;
    sendAcks();
    // Stopping: jobs claimed but not started go back to the queue at once.
    for (const c of buffer.splice(0)) {
      await d.nack(c.id, workerId, { attempt: c.attempt, error: 'the worker stopped before starting it', retry: true }).catch(() => {});
      executed--;
    }
    await Promise.all(running);
  };

  const slots = claimer();
  const grace = opts.graceMs ?? 30_000;
  const onStop = () => {
    log(`stopping: no more claims; waiting up to ${grace} ms for running jobs`);
    setTimeout(() => hard.stop(), grace).unref();
  };
  stop.addEventListener('abort', onStop, { once: true });
  try {
    await slots;
  } finally {
    stop.removeEventListener('abort', onStop);
    await jobOpts.logs.flush();
    // Stopping, said: the plane's feed tells `stopped` rather than, a minute later, `lost`.
    await Promise.all(pools.map((p) => d.workerStopped(p, workerId).catch(() => {})));
  }
  return executed;
}
