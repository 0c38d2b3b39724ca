/**
 * runWorker: claims from one or more pools and runs what it claims, `concurrency` at a time.
 * It claims with waits (the plane wakes it when work arrives), never a tight poll. On `stop` it
 * claims no more, lets running jobs finish for up to `graceMs`, then aborts them.
 */
import { defaultDispatch } from '../default.ts';
import { loadJobContext } from './context.ts';
import type { Claimed, DispatchPlane } from '../types.ts';
import { LakeshoreError, TimeoutError } from '../errors.ts';
import { HardStop, runJob, type JobOptions } from './job.ts';
import { CancelWatch } from './cancel-watch.ts';
import { JobClock } from './job-clock.ts';
import { AckLane } from './acks.ts';
import { Prefetch } from './prefetch.ts';
import { LogShipper } from './logs.ts';
import type { Mounts } from './mount.ts';
import { ACKS_WAIT_MS } from '../../src/core/limits.ts';
import { randomId } from '../ids.ts';
import { CLIENT_VERSION } from '../version.ts';
import { checkWorkerOptions, DEFAULT_TIME_LIMIT_MS, ONCE_WAIT_MS, type WorkerOptions } from './options.ts';
import { eitherSignal } from './signals.ts';

export type { WorkerOptions } from './options.ts';

/** The most one claim asks for (the plane's default batch limit). */
const MAX_CLAIM = 1000;
/** How often a worker's claims carry who it is. */
const INFO_EVERY_MS = 30_000;
/** How often a worker reads its pools' settings again (their time limits): a change reaches it within this. */
const QUEUE_SETTINGS_MS = 30_000;

/** This host and process, for worker ids: `host:pid` where the runtime has them. */
async function hostName(): Promise<string> {
  const pid = (globalThis as { process?: { pid?: number } }).process?.pid;
  const host = await import('node:os').then(
    (os) => os.hostname(),
    () => 'worker',
  );
  return pid === undefined ? host : `${host}:${pid}`;
}

/** The code cache of a worker that mounts pushed code (worker/mount.ts), fetching from its plane. */
async function mountsFor(d: DispatchPlane, home?: string): Promise<Mounts> {
  const fetchCode = (d as { fetchCode?: (stamp: string) => Promise<{ bytes: Uint8Array; sha256: string | null }> }).fetchCode;
  if (typeof fetchCode !== 'function')
    throw new Error("code: 'mount' needs an HTTP plane: pushed code lives there (a local plane runs this machine's code)");
  const [{ Mounts }, { join }, { homedir }] = await Promise.all([import('./mount.ts'), import('node:path'), import('node:os')]);
  const env = (globalThis as { process?: { env: Record<string, string | undefined> } }).process?.env ?? {};
  return new Mounts((stamp) => fetchCode.call(d, stamp), home ?? join(env.LAKESHORE_HOME || join(homedir(), '.lakeshore'), 'code'));
}

/** Runs until `stop` (or one job with `once`); answers the number of jobs it started. */
export async function runWorker(queues: string | string[], opts: WorkerOptions = {}): Promise<number> {
  const pools = (Array.isArray(queues) ? queues : [queues]).filter(Boolean);
  if (!pools.length) throw new Error('runWorker needs at least one queue');
  const odd = pools.find((p) => typeof p !== 'string');
  if (odd !== undefined)
    throw new TypeError(
      `runWorker(queues, options): queues is a queue's name or an array of names, not ${typeof odd === 'object' ? 'an object (the options come second)' : `a ${typeof odd}`}`,
    );
  checkWorkerOptions(opts);
  const d = opts.dispatch ?? defaultDispatch();
  const host = await hostName();
  await loadJobContext();
  const mounts = opts.code === 'mount' ? await mountsFor(d, opts.codeHome) : null;
  return new Worker(d, pools, opts.workerId ?? `${host}:${randomId().slice(0, 8)}`, host.split(':')[0]!, mounts, opts).run();
}

/**
 * One worker's loop, in four parts: claiming (`claimer`, `claimInto`: batches of jobs, up to two
 * claims in flight), the prefetch buffer (claimed jobs waiting for a free slot, their leases
 * running), running (`startJobs`, `runOne`: `concurrency` handlers at a time) and acking (the
 * AckLane: acks ride the next claim). The counters below are the only state they share.
 */
class Worker {
  private readonly d: DispatchPlane;
  private readonly pools: string[];
  private readonly workerId: string;
  private readonly opts: WorkerOptions;
  private readonly concurrency: number;
  private readonly stop: AbortSignal;
  /** Takes this worker's listeners off the caller's stop signals, which may outlive it. */
  private readonly forgetStops: () => void;
  private readonly hard = new HardStop();
  private readonly log: (msg: string) => void;
  private readonly leaseMs: number | null;
  private readonly claimWaitMs: number;
  private readonly jobOpts: JobOptions;
  private readonly acks: AckLane;
  private readonly prefetch: Prefetch;
  /** Who this worker is: rides its first claim, and one every INFO_EVERY_MS after (the plane lists it). */
  private readonly info: WorkerInfo;
  private infoAt = 0;

  /** Claimed jobs not started yet (the prefetch buffer), in claim order. */
  private readonly buffer: Claimed[] = [];
  private readonly running = new Set<Promise<void>>();
  private readonly claims = new Set<Promise<void>>();
  /** Jobs claimed (running or buffered) plus jobs asked for by claims in flight. */
  private held = 0;
  /** Handlers running; a job whose ack is still in flight no longer counts. */
  private active = 0;
  /** Finished handlers whose ack or nack is still on its way (they gave their slot up early). */
  private acking = 0;
  /** Jobs started, what runWorker answers. */
  private started = 0;
  /** The next pool to claim from, round robin. */
  private turn = 0;
  /** The last claim came back with all it asked for. */
  private backlog = false;
  /** With `once`: a claim took a job, or every pool was asked and none had one. */
  private claimedOnce = false;
  private onceTries = 0;
  private gaveUp = false;
  /** Wakes the claim loop: a slot came free, or an ack waits for a claim. */
  private kick: () => void = () => {};

  constructor(d: DispatchPlane, pools: string[], workerId: string, host: string, mounts: Mounts | null, opts: WorkerOptions) {
    this.d = d;
    this.pools = pools;
    this.workerId = workerId;
    this.opts = opts;
    this.concurrency = Math.max(1, opts.concurrency ?? 1);
    [this.stop, this.forgetStops] = eitherSignal(opts.stop, opts.stopNow);
    this.log = opts.log ?? (() => {});
    this.leaseMs = opts.leaseMs ?? null;
    this.claimWaitMs = opts.claimWaitMs ?? 20_000;
    this.acks = new AckLane(d, workerId, () => this.kick());
    this.prefetch = new Prefetch(opts.prefetch ?? 'auto', 2 * MAX_CLAIM);
    this.jobOpts = {
      dispatch: d,
      ack: (c, result) => this.acks.ack(c, result),
      workerId,
      registry: opts.registry ?? {},
      root: opts.root ?? process.cwd(),
      allowImport: opts.allowImport ?? d.inProcess === true,
      retries: opts.retries ?? Infinity,
      timeLimitMs: opts.timeLimitMs === 0 ? null : (opts.timeLimitMs ?? DEFAULT_TIME_LIMIT_MS),
      timeLimitIsDefault: opts.timeLimitMs === undefined,
      queueTimeLimitMs: (queue) => this.queueLimits.get(queue) ?? null,
      clock: new JobClock(opts.heartbeatMs ?? Math.max(200, Math.floor((this.leaseMs ?? 30_000) / 3))),
      cancels: new CancelWatch(d),
      leaseMs: this.leaseMs,
      hardStop: this.hard,
      log: this.log,
      onDone: opts.onDone,
      logs: new LogShipper(d, workerId),
      mounts,
    };
    const proc = (globalThis as { process?: { pid?: number } }).process;
    this.info = { queues: pools, host, pid: proc?.pid, version: CLIENT_VERSION, concurrency: this.concurrency };
  }

  /** Each pool's `time_limit_ms` setting, read at the start and every QUEUE_SETTINGS_MS after. */
  private readonly queueLimits = new Map<string, number | null>();

  private async readQueueLimits(): Promise<void> {
    await Promise.all(
      this.pools.map((p) =>
        this.d.queueInfo(p).then(
          (info) => void this.queueLimits.set(p, info.settings.timeLimitMs),
          () => {}, // kept as last read: the plane may be away
        ),
      ),
    );
  }

  async run(): Promise<number> {
    const grace = this.opts.graceMs ?? 30_000;
    // The queues' settings, read first; a stop while the plane is away does not wait for them.
    await Promise.race([
      this.readQueueLimits(),
      new Promise((r) => (this.stop.aborted ? r(null) : this.stop.addEventListener('abort', r, { once: true }))),
    ]);
    const reread = setInterval(() => void this.readQueueLimits(), QUEUE_SETTINGS_MS);
    (reread as { unref?: () => void }).unref?.();
    this.stop.addEventListener('abort', () => clearInterval(reread), { once: true });
    const onStop = () => {
      if (this.opts.stopNow?.aborted) return;
      this.log(`stopping: no more claims; waiting up to ${grace} ms for running jobs`);
      setTimeout(() => this.hard.stop(), grace).unref();
    };
    this.stop.addEventListener('abort', onStop, { once: true });
    const onStopNow = () => {
      this.log('stopping now: the running jobs go back to their queues');
      this.hard.stop();
    };
    if (this.opts.stopNow?.aborted) onStopNow();
    else this.opts.stopNow?.addEventListener('abort', onStopNow, { once: true });
    try {
      await this.claimer();
    } finally {
      clearInterval(reread);
      this.stop.removeEventListener('abort', onStop);
      this.opts.stopNow?.removeEventListener('abort', onStopNow);
      this.forgetStops();
      this.jobOpts.cancels?.close();
      await this.jobOpts.logs.flush();
      // Stopping, said: the plane's feed tells `stopped` rather than, a minute later, `lost`.
      await Promise.all(this.pools.map((p) => this.d.workerStopped(p, this.workerId).catch(() => {})));
    }
    return this.started;
  }

  /** Jobs the worker may hold at once: its slots plus the prefetch window (one with `once`). */
  private capacity(): number {
    return this.opts.once ? 1 : this.concurrency + this.prefetch.depth(this.leaseMs ?? 30_000);
  }

  private done(): boolean {
    return this.stop.aborted || (!!this.opts.once && (this.claimedOnce || this.gaveUp));
  }

  // ------------------------------------------------------------------ claiming

  /**
   * Claims fill free capacity in batches (claimMany): a busy worker costs one round trip per
   * batch of jobs, not one per job. Up to two claims are in flight at once, each holding the
   * capacity it asked for. With `prefetch`, claimed jobs may wait in the buffer (their lease
   * running) so the next batch is at hand when a job ends: worth it for short jobs, not long ones.
   */
  private async claimer(): Promise<void> {
    while (!this.done()) {
      const cap = this.capacity();
      if (this.held < cap && this.mayClaim(cap)) {
        const want = Math.min(MAX_CLAIM, cap - this.held);
        this.held += want;
        const p: Promise<void> = this.claimInto(want).finally(() => this.claims.delete(p));
        this.claims.add(p);
        continue;
      }
      // Not claiming now: acks waiting for a claim go on their own.
      this.acks.flush();
      // Let jobs finishing in the same turn free their capacity together before claiming again.
      await Promise.race([new Promise<void>((r) => (this.kick = r)), ...this.claims]);
      await new Promise((r) => setImmediate(r));
    }
    await Promise.all(this.claims);
    this.acks.claiming = false;
    this.acks.flush();
    // Stopping: jobs claimed but not started go back to the queue at once, uncharged (a nack would
    // spend an attempt of a job that never ran); a plane without release takes a nack.
    const unstarted = new Map<string, Claimed[]>();
    for (const c of this.buffer.splice(0)) unstarted.set(c.queue, [...(unstarted.get(c.queue) ?? []), c]);
    for (const [queue, cs] of unstarted) {
      const items = cs.map((c) => ({ id: c.id, attempt: c.attempt }));
      if (
        await this.d.release(queue, this.workerId, items).then(
          () => true,
          () => false,
        )
      )
        continue;
      for (const c of cs)
        await this.d
          .nack(c.id, this.workerId, { attempt: c.attempt, error: 'the worker stopped before starting it', retry: true })
          .catch(() => {});
    }
    await Promise.all(this.running);
  }

  /**
   * A second claim goes in flight only while the queue has a backlog (the last claim came back
   * full: with none, two claims would both wait and each submit would wake one, a request and a
   * D1 batch more per few jobs), and only once half the window is free: one sent for the first
   * few slots that free up comes back with a few jobs, and until it does the worker may not claim
   * the rest (test/node/worker-claims.test.ts).
   */
  private mayClaim(cap: number): boolean {
    if (this.claims.size === 0) return true;
    return this.claims.size === 1 && this.backlog && !this.opts.once && cap - this.held >= cap / 2;
  }

  /** One claim of up to `want` jobs from the next pool, with the acks that may ride it; what it took goes to the buffer. */
  private async claimInto(want: number): Promise<void> {
    const pool = this.pools[this.turn++ % this.pools.length]!;
    // With several pools, wait briefly on each in turn; with one, wait long; once, not long at all.
    const waitMs = this.opts.once
      ? Math.max(0, Math.floor((this.opts.onceWaitMs ?? ONCE_WAIT_MS) / this.pools.length))
      : this.pools.length === 1
        ? this.claimWaitMs
        : Math.min(this.claimWaitMs, 1_000);
    // Acks ride a claim only while work flows (a claim with acks waits at most ACKS_WAIT_MS, then
    // the worker must claim again); a worker that waits for each job sends them alone.
    const riding = this.prefetch.jobsWithin(ACKS_WAIT_MS) >= 2 ? this.acks.take(pool, MAX_CLAIM) : [];
    let got: Claimed[] = [];
    try {
      const t0 = performance.now();
      const now = Date.now();
      const tell = now - this.infoAt >= INFO_EVERY_MS;
      if (tell) this.infoAt = now;
      const worker = tell ? this.info : undefined;
      const claimOpts = { waitMs, leaseMs: this.leaseMs ?? undefined, signal: this.stop, worker };
      if (riding.length) {
        const out = await this.d.ackAndClaim(
          pool,
          this.workerId,
          riding.map((a) => ({ id: a.c.id, attempt: a.c.attempt, result: a.result })),
          want,
          claimOpts,
        );
        riding.forEach((a, i) => {
          a.done(out.acks[i] ?? null);
        });
        got = out.claimed;
      } else got = await this.d.claimMany(pool, this.workerId, want, claimOpts);
      if (got.length === want) this.prefetch.claimTook(performance.now() - t0); // a claim that waited for work says nothing of the round trip
      this.backlog = got.length === want;
    } catch (e) {
      for (const a of riding) a.done(e instanceof Error ? e : new Error(String(e)));
      // A refusal (bad token, wrong role, bad request) stops the worker; a plane that is away
      // or busy does not: say so, wait a little, and let the loop claim again.
      if (e instanceof LakeshoreError && !e.retryable && !(e instanceof TimeoutError)) throw e;
      if (!this.stop.aborted) {
        this.log(`claim on ${pool} failed: ${e instanceof Error ? e.message : String(e)}; retrying`);
        await new Promise((r) => setTimeout(r, 1_000));
      }
    } finally {
      this.held -= want - got.length;
    }
    this.claimedOnce ||= got.length > 0;
    if (this.opts.once && ++this.onceTries >= this.pools.length) this.gaveUp = true; // every pool asked once: nothing came
    this.buffer.push(...got);
    this.startJobs();
  }

  // ------------------------------------------------------------------ the buffer and running

  /**
   * Starts buffered jobs while slots are free; a job whose lease ran out while it waited is dropped,
   * not run. A stopping worker starts none: they go back to the queue as it returns.
   */
  private startJobs(): void {
    while (this.active < this.concurrency && this.buffer.length && !this.stop.aborted) {
      const c = this.buffer.shift()!;
      if (c.leaseUntil <= Date.now()) {
        // The plane hands it out again; do not run it twice, and claim less far ahead.
        this.held--;
        this.prefetch.overshot();
        continue;
      }
      this.runOne(c);
    }
    this.prefetch.busy(this.buffer.length > 0 || this.active >= this.concurrency, this.active === 0 && this.buffer.length === 0);
  }

  private runOne(c: Claimed): void {
    this.active++;
    this.started++;
    let freed = false;
    const free = () => {
      if (freed) return;
      freed = true;
      this.prefetch.jobDone();
      this.active--;
      this.held--;
      this.startJobs();
      this.kick();
    };
    // A finished handler frees its slot while its ack is on the way, but only while fewer acks
    // are than the claim window holds: if the plane is slow or away, jobs wait for their acks
    // instead of piling up (each still holding a lease and sending heartbeats).
    let early = false;
    const handlerDone = () => {
      if (this.acking >= this.capacity()) return;
      this.acking++;
      early = true;
      free();
    };
    // One promise a job, not a chain of three: a worker's cost a job is mostly what it allocates.
    let job: Promise<void> | null = null;
    job = (async () => {
      try {
        const outcome = await runJob(c, this.jobOpts, handlerDone);
        this.opts.onJob?.(c.id, outcome, c.attempt);
      } catch (e) {
        this.log(`job ${c.id}: ${e instanceof Error ? e.message : String(e)}`);
      } finally {
        if (early) this.acking--;
        free();
        if (job) this.running.delete(job);
      }
    })();
    this.running.add(job);
  }
}

type WorkerInfo = { queues: string[]; host: string; pid: number | undefined; version: string; concurrency: number };
