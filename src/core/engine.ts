/**
 * The contract, executable over any storage port. The queue Durable Object runs it over D1, the
 * local plane over node:sqlite. It validates input, runs each verb's plan through group commit,
 * parks waiters and wakes them after the transition that satisfies them.
 */
import { Committer, type CommitterOptions } from './committer.ts';
import { badRequest, LakeshoreError, notFound, toError } from './errors.ts';
import { ACKS_WAIT_MS, DEFAULT_LIMITS, type Limits } from './limits.ts';
import type { Port, StmtResult } from './port.ts';
import { outcomeOf } from './rows.ts';
import { isTerminal, type State } from './states.ts';
import { cancelPlan } from './sql/cancel.ts';
import { claimPlan, deadlineOf, nextLeasePlan } from './claims.ts';
import { expireStmt, nextLeaseStmt } from './sql/expire.ts';
import { ackManyPlan, ackPlan, nackPlan, type AckItem, type Finished } from './sql/finish.ts';
import { heartbeatPlan } from './sql/heartbeat.ts';
import { appendPlan, readPlan, trimPlan, type Appended } from './sql/journal.ts';
import { configurePlan, countPlan, getPlan, queueOfPlan, queuesPlan } from './sql/read.ts';
import { submitManyPlan, submitPlan, type SubmitInput, type Submitted } from './sql/submit.ts';
import type { Claimed, HeartbeatAnswer, Invocation, JournalPage, Outcome } from './types.ts';
import * as v from './validate.ts';
import { claimArgs, frameInput, holder, invocationError, journalCursor, pageLimit, submitInput, type AppendRequest, type ClaimArgs, type ClaimRequest, type HolderRequest, type SubmitRequest } from './requests.ts';
import { failed, settle, type Settled } from './settled.ts';
import { keys, Waiters } from './waiters.ts';
import { FollowingReader, ParkedClaim, ride } from './handoff.ts';
import type { Plan } from './plan.ts';

export interface EngineOptions {
  limits?: Partial<Limits>;
  now?: () => number;
  random?: () => number;
  committer?: CommitterOptions;
  /** Told of every new lease deadline, so a plane can arm a timer (the Durable Object's alarm). */
  onLease?: (ns: string, queue: string, deadline: number) => void;
}

/** Most envelope bytes in one set-based INSERT (its JSON parameter carries them as hex). */
const SET_BYTES = 256 << 10;

export class Engine {
  readonly limits: Limits;
  readonly waiters = new Waiters();
  readonly committer: Committer;
  /** Queues seen marked sampled (their level counts are kept; see claims.ts). */
  private readonly sampled = new Set<string>();
  /** Bumped on every wake, so a reader can tell a change landed while its read was in flight. */
  private epoch = 0;
  private readonly now: () => number;
  private readonly random: () => number;
  private readonly onLease: EngineOptions['onLease'];

  constructor(port: Port, opts: EngineOptions = {}) {
    this.limits = { ...DEFAULT_LIMITS, ...opts.limits };
    this.now = opts.now ?? Date.now;
    this.random = opts.random ?? Math.random;
    this.onLease = opts.onLease;
    this.committer = new Committer(port, opts.committer);
  }

  // ---------------------------------------------------------------- producers

  async submit(ns: string, queue: string, req: SubmitRequest): Promise<Submitted> {
    const plan = submitPlan(this.now(), ns, v.queue(queue, this.limits), submitInput(req, this.limits));
    return this.feed(ns, queue, plan, 1, (out) => (out.created ? 1 : 0));
  }

  /**
   * Submits many; each item keeps its own id, key, idempotency and error. Valid items go to
   * storage as few set-based INSERTs (see submitManyPlan); an oversized envelope goes on its own.
   */
  async submitMany(ns: string, queue: string, items: SubmitRequest[]): Promise<Settled<Submitted>[]> {
    v.queue(queue, this.limits);
    if (items.length > this.limits.maxBatch) throw badRequest(`a batch holds at most ${this.limits.maxBatch} items`);
    const out: Settled<Submitted>[] = new Array(items.length);
    const groups: { at: number[]; inputs: SubmitInput[]; bytes: number }[] = [];
    items.forEach((it, i) => {
      let input: SubmitInput;
      try {
        input = submitInput(it, this.limits);
      } catch (e) {
        out[i] = failed(e);
        return;
      }
      const size = input.envelope.length;
      let g = groups[groups.length - 1];
      if (size > SET_BYTES || !g || g.bytes + size > SET_BYTES) groups.push((g = { at: [], inputs: [], bytes: 0 }));
      g.at.push(i);
      g.inputs.push(input);
      g.bytes += size;
    });
    await Promise.all(groups.map(async (g) => {
      const settled = await settle(
        g.bytes > SET_BYTES
          ? this.submit(ns, queue, items[g.at[0]!]!).then((r) => [r])
          : this.feed(ns, queue, submitManyPlan(this.now(), ns, queue, g.inputs), g.inputs.length, (rs) => rs.filter((r) => !(r instanceof Error) && r.created).length),
      );
      g.at.forEach((i, k) => {
        const r = settled.ok ? settled.value[k]! : settled.error;
        out[i] = r instanceof Error ? failed(r) : { ok: true, value: r };
      });
    }));
    return out;
  }

  async cancel(ns: string, id: unknown, queue: string | null = null): Promise<boolean> {
    const out = await this.committer.run(cancelPlan(this.now(), ns, v.id(id, this.limits), queue));
    if (out.cancelled) this.wakeFinished(ns, String(id));
    return out.cancelled;
  }

  async get(ns: string, id: unknown): Promise<Invocation | null> {
    return this.committer.run(getPlan(ns, v.id(id, this.limits)));
  }

  async queueOf(ns: string, id: unknown): Promise<string | null> {
    return this.committer.run(queueOfPlan(ns, v.id(id, this.limits)));
  }

  async count(ns: string, queue: unknown, state?: unknown): Promise<number> {
    return this.committer.run(countPlan(ns, v.queue(queue, this.limits), v.state(state, 'queued')));
  }

  /** Waits until the invocation is terminal, up to `timeoutMs`; then answers its outcome. */
  async result(ns: string, id: unknown, timeoutMs?: unknown, signal?: AbortSignal): Promise<Outcome> {
    const invId = v.id(id, this.limits);
    const wait = v.waitMs('timeout', timeoutMs, 30_000, this.limits.maxResultWaitMs);
    const deadline = this.now() + wait;
    for (;;) {
      const seen = this.epoch;
      const row = await this.get(ns, invId);
      if (!row) throw notFound(`invocation ${JSON.stringify(invId)}`);
      if (isTerminal(row.state)) return outcomeOf({ state: row.state, result: row.result, error: row.error ? JSON.stringify(row.error) : null });
      if (this.epoch !== seen) continue;
      const left = deadline - this.now();
      if (left <= 0 || signal?.aborted || !(await this.waiters.wait(keys.inv(ns, invId), left, signal))) {
        const last = await this.get(ns, invId);
        if (last && isTerminal(last.state)) continue;
        return { state: (last?.state ?? row.state) as 'queued' | 'running', timedOut: true };
      }
    }
  }

  /** The queues of a namespace that ever held work or settings. */
  async queues(ns: string): Promise<string[]> {
    return this.committer.run(queuesPlan(ns));
  }

  async configure(ns: string, queue: unknown, cfg: { leaseMs?: unknown; maxAttempts?: unknown }): Promise<void> {
    const leaseMs = cfg.leaseMs === undefined || cfg.leaseMs === null ? null : v.nonNegInt('lease_ms', cfg.leaseMs, 0, this.limits.maxLeaseMs);
    const maxAttempts = cfg.maxAttempts === undefined || cfg.maxAttempts === null ? null : v.nonNegInt('max_attempts', cfg.maxAttempts, 0, 1000);
    if (leaseMs !== null && leaseMs < 1) throw badRequest('lease_ms must be at least 1');
    if (maxAttempts !== null && maxAttempts < 1) throw badRequest('max_attempts must be at least 1');
    await this.committer.run(configurePlan(this.now(), ns, v.queue(queue, this.limits), leaseMs, maxAttempts));
  }

  // ---------------------------------------------------------------- workers

  async claim(ns: string, queue: unknown, req: ClaimRequest): Promise<Claimed | null> {
    const [c] = await this.claimMany(ns, queue, { ...req, max: 1 });
    return c ?? null;
  }

  /** Claims up to `max` invocations; waits (up to waitMs) only while it has none. */
  async claimMany(ns: string, queue: unknown, req: ClaimRequest & { max?: unknown }): Promise<Claimed[]> {
    return this.claimWith(ns, claimArgs(queue, req, this.limits), req.signal);
  }

  /**
   * A worker's acks and its next claim in one request: the acks (each fenced alone, exactly as
   * ackMany) and the claim go to storage in one batch. A claim that carries acks waits at most
   * ACKS_WAIT_MS for work, so their answers are never held back long; a worker that found
   * nothing claims again without acks and waits as long as it likes. Bad claim arguments
   * refuse the whole request before any ack lands.
   */
  async ackAndClaim(ns: string, queue: unknown, acks: (HolderRequest & { id: unknown; result?: unknown })[], req: ClaimRequest & { max?: unknown }): Promise<{ acks: Settled<{ absorbed: boolean }>[]; claimed: Claimed[] }> {
    const args = claimArgs(queue, req, this.limits);
    if (acks.length > this.limits.maxBatch) throw badRequest(`a batch holds at most ${this.limits.maxBatch} items`);
    if (acks.length) args.wait = Math.min(args.wait, ACKS_WAIT_MS);
    // Both start now (one batch); awaited together, so a failure of either is never left unhandled.
    const [acked, claimed] = await Promise.all([this.ackMany(ns, acks.map((a) => ({ ...a, queue: args.q }))), this.claimWith(ns, args)]);
    return { acks: acked, claimed };
  }

  private async claimWith(ns: string, { q, max, input, wait }: ClaimArgs, signal?: AbortSignal): Promise<Claimed[]> {
    const deadline = this.now() + wait;
    const key = keys.queue(ns, q);
    // fifo and filo claims that park can be handed rows by the next submit (see handoff.ts).
    const rides = input.kind !== 'boltzmann' || input.temperature === 0;
    for (;;) {
      const seen = this.epoch;
      let next: number | null | undefined;
      const ctx = { now: this.now, ns, queue: q, limits: this.limits, random: this.random, sampled: this.sampled, afterExpire: (ex: StmtResult) => this.afterExpire(ns, q, ex) };
      const got = await this.committer.run(claimPlan(wait > 0 ? { ...ctx, nextLease: (n) => (next = n) } : ctx, input, max));
      if (got.length) return this.claimed(ns, q, got);
      if (this.epoch !== seen) continue;
      let left = deadline - this.now();
      if (left <= 0 || signal?.aborted) return [];
      // Park until a transition wakes us, or until the queue's next lease runs out: then this
      // claim expires it itself, whether or not any alarm or other process is still there.
      if (next === undefined) next = await this.committer.run(nextLeasePlan(ns, q));
      if (this.epoch !== seen) continue;
      const untilLease = next === null ? Infinity : next - this.now() + 1;
      const parked = rides ? new ParkedClaim(ns, q, { ...input, kind: input.kind === 'filo' ? 'filo' : 'fifo' }, max, this.limits.defaultLeaseMs) : undefined;
      const woken = await this.waiters.wait(key, Math.max(1, Math.min(left, untilLease)), signal, parked);
      if (parked?.riding) await parked.riding;
      if (parked?.rows?.length) return this.claimed(ns, q, parked.rows);
      left = deadline - this.now();
      if (!woken && (left <= 0 || signal?.aborted)) return [];
    }
  }

  private claimed(ns: string, q: string, got: Claimed[]): Claimed[] {
    this.onLease?.(ns, q, Math.max(...got.map((c) => c.leaseUntil)));
    return got;
  }

  /** Commits `plan` with the waiters parked on `key` riding along (handoff.ts). */
  private async withRiders<T>(key: string, plan: Plan<T>, most?: number) {
    const r = ride(this.waiters, key, this.now(), plan, most);
    try {
      return { out: await this.committer.run(r.plan), riders: r.riders };
    } finally {
      r.release();
    }
  }

  /** Runs a transition that queues up to `most` rows on `queue`, with claims parked there riding along. */
  private async feed<T>(ns: string, queue: string, plan: Plan<T>, most: number, queued: (out: T) => number): Promise<T> {
    const key = keys.queue(ns, queue);
    const { out, riders } = await this.withRiders(key, plan, most);
    const n = queued(out);
    // A rider that came back short means nothing was left to claim: no one else need wake.
    const drained = riders.some((x) => x instanceof ParkedClaim && x.short);
    if (n > 0) this.wake(key, drained ? 0 : n);
    return out;
  }

  async ack(ns: string, id: unknown, req: HolderRequest & { result?: unknown }): Promise<{ absorbed: boolean }> {
    const invId = v.id(id, this.limits);
    const result = req.result === undefined || req.result === null ? null : v.bytes('result', req.result, this.limits.resultBytes);
    const out = await this.committer.run(ackPlan(this.now(), ns, invId, req.queue ?? null, holder(req), result));
    if (!out.absorbed) this.wakeFinished(ns, invId);
    return { absorbed: out.absorbed };
  }

  /** Acks many in one guarded UPDATE; each item is fenced on its own, and a stale item fails alone. */
  async ackMany(ns: string, items: (HolderRequest & { id: unknown; result?: unknown })[]): Promise<Settled<{ absorbed: boolean }>[]> {
    if (items.length > this.limits.maxBatch) throw badRequest(`a batch holds at most ${this.limits.maxBatch} items`);
    const out: Settled<{ absorbed: boolean }>[] = new Array(items.length);
    const at: number[] = [];
    const valid: AckItem[] = [];
    items.forEach((it, i) => {
      try {
        const id = v.id(it.id, this.limits);
        const result = it.result === undefined || it.result === null ? null : v.bytes('result', it.result, this.limits.resultBytes);
        valid.push({ id, queue: it.queue ?? null, holder: holder(it), result });
        at.push(i);
      } catch (e) {
        out[i] = failed(e);
      }
    });
    // Results travel as hex in one JSON parameter; a batch too large for that acks one by one.
    const bytes = valid.reduce((n, a) => n + (a.result?.length ?? 0), 0);
    const answers: (Finished | Error)[] = valid.length === 0 ? []
      : bytes > SET_BYTES ? await Promise.all(valid.map((a) => this.committer.run(ackPlan(this.now(), ns, a.id, a.queue, a.holder, a.result)).catch((e: unknown) => toError(e))))
      : await this.committer.run(ackManyPlan(this.now(), ns, valid));
    answers.forEach((r, k) => {
      if (r instanceof Error) out[at[k]!] = failed(r);
      else {
        if (!r.absorbed) this.wakeFinished(ns, valid[k]!.id);
        out[at[k]!] = { ok: true, value: { absorbed: r.absorbed } };
      }
    });
    return out;
  }

  async nack(ns: string, id: unknown, req: HolderRequest & { error: unknown; retry?: unknown }): Promise<{ state: 'queued' | 'failed'; absorbed: boolean }> {
    const invId = v.id(id, this.limits);
    const error = invocationError(req.error, this.limits);
    if (req.retry !== undefined && typeof req.retry !== 'boolean') throw badRequest('retry must be a boolean');
    const retry = req.retry ?? true;
    const plan = nackPlan(this.now(), ns, invId, req.queue ?? null, holder(req), error, retry);
    // A retry queues the row again: claims parked on its queue ride along when the caller named it.
    const fed = retry ? (req.queue ?? null) : null;
    const requeues = (out: Finished) => (!out.absorbed && out.state === 'queued' ? 1 : 0);
    const out = fed ? await this.feed(ns, fed, plan, 1, requeues) : await this.committer.run(plan);
    if (!out.absorbed) {
      if (out.state !== 'queued') this.wakeFinished(ns, invId);
      else if (!fed) this.wake(keys.queue(ns, out.queue), 1); // feed() has woken the queue already
      this.wake(keys.journal(ns, invId));
    }
    return { state: out.state === 'queued' ? 'queued' : 'failed', absorbed: out.absorbed };
  }

  /** Nacks many; each item is fenced on its own, and a stale item fails alone. */
  async nackMany(ns: string, items: (HolderRequest & { id: unknown; error: unknown; retry?: unknown })[]): Promise<Settled<{ state: 'queued' | 'failed'; absorbed: boolean }>[]> {
    if (items.length > this.limits.maxBatch) throw badRequest(`a batch holds at most ${this.limits.maxBatch} items`);
    return Promise.all(items.map((it) => settle(this.nack(ns, it.id, it))));
  }

  async heartbeat(ns: string, id: unknown, req: HolderRequest & { leaseMs?: unknown }): Promise<HeartbeatAnswer> {
    const invId = v.id(id, this.limits);
    const leaseMs = req.leaseMs === undefined || req.leaseMs === null ? null : v.nonNegInt('lease_ms', req.leaseMs, 0, this.limits.maxLeaseMs);
    if (leaseMs !== null && leaseMs < 1) throw badRequest('lease_ms must be at least 1');
    const out = await this.committer.run(heartbeatPlan(this.now(), ns, invId, req.queue ?? null, holder(req), leaseMs, this.limits.defaultLeaseMs));
    if (out.leaseUntil !== null && req.queue) this.onLease?.(ns, req.queue, out.leaseUntil);
    return out;
  }

  async append(ns: string, id: unknown, req: AppendRequest): Promise<Appended> {
    const invId = v.id(id, this.limits);
    const frame = frameInput(req, this.limits);
    const key = keys.journal(ns, invId);
    // Readers following this journal ride along: they get the new frame in the same round trip.
    const { out } = await this.withRiders(key, appendPlan(this.now(), ns, invId, req.queue ?? null, holder(req), frame, this.limits.framesPerInvocation));
    if (!out.absorbed) this.wake(key);
    return out;
  }

  // ---------------------------------------------------------------- journal readers

  async read(ns: string, id: unknown, since?: unknown, limit?: unknown): Promise<JournalPage> {
    return this.committer.run(readPlan(ns, v.id(id, this.limits), journalCursor(since), pageLimit(limit)));
  }

  /** Like read, but waits up to `timeoutMs` until there is a frame after `since` or the stream ended. */
  async follow(ns: string, id: unknown, since?: unknown, timeoutMs?: unknown, signal?: AbortSignal, limit?: unknown): Promise<JournalPage> {
    const invId = v.id(id, this.limits);
    const cursor = journalCursor(since);
    const lim = pageLimit(limit);
    const wait = v.waitMs('timeout', timeoutMs, 30_000, this.limits.maxResultWaitMs);
    const deadline = this.now() + wait;
    for (;;) {
      const seen = this.epoch;
      const page = await this.committer.run(readPlan(ns, invId, cursor, lim));
      if (page.frames.length || page.done) return page;
      if (this.epoch !== seen) continue;
      const left = deadline - this.now();
      if (left <= 0 || signal?.aborted) return page;
      // Parked, a reader rides along with the next append to this invocation (handoff.ts).
      const reader = new FollowingReader(ns, invId, cursor, lim);
      const woken = await this.waiters.wait(keys.journal(ns, invId), left, signal, reader);
      if (reader.riding) await reader.riding;
      if (reader.page) return reader.page;
      if (!woken) return page;
    }
  }

  async trim(ns: string, id: unknown, keepLast: unknown, queue: string | null = null): Promise<number> {
    const out = await this.committer.run(trimPlan(ns, v.id(id, this.limits), queue, v.nonNegInt('keep_last', keepLast, 0)));
    return out.trimmed;
  }

  // ---------------------------------------------------------------- leases

  /** Returns expired running rows of a queue to queued (or failed); answers the next deadline. */
  async expire(ns: string, queue: string): Promise<number | null> {
    const now = this.now();
    return this.committer.run<number | null>({
      stmts: [expireStmt(now, ns, queue, this.limits.defaultMaxAttempts), nextLeaseStmt(ns, queue)],
      done: ([ex, next]) => {
        this.afterExpire(ns, queue, ex!);
        return deadlineOf(next!);
      },
    });
  }

  // ---------------------------------------------------------------- internals

  private afterExpire(ns: string, queue: string, ex: StmtResult): void {
    let requeued = 0;
    for (const r of ex.rows) {
      if (r.state === 'queued') requeued++;
      else this.wakeFinished(ns, String(r.id));
      this.wake(keys.journal(ns, String(r.id)));
    }
    if (requeued) this.wake(keys.queue(ns, queue), requeued);
  }

  private wake(key: string, n?: number): void {
    this.epoch++;
    this.waiters.wake(key, n);
  }

  /** Wakes everything parked on the store (another process changed it). */
  wakeAll(): void {
    this.epoch++;
    this.waiters.wakeAll();
  }

  private wakeFinished(ns: string, id: string): void {
    this.wake(keys.inv(ns, id));
    this.wake(keys.journal(ns, id));
  }
}

export type { Submitted, Appended, Settled, SubmitRequest, ClaimRequest, HolderRequest, AppendRequest };
export type { State };
