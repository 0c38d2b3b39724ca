/**
 * The contract, executable over any storage port. The queue Durable Object runs it over D1, the
 * local plane over node:sqlite. It validates input, runs each verb's plan through group commit,
 * parks waiters (park.ts) and wakes them after the transition that satisfies them. Here are the
 * producers' verbs; the workers' are `engine.work` (work.ts), the journal's `engine.journal`
 * (journal.ts). Every verb is async: a bad argument is a rejected promise, never a throw.
 */
import type { PushHosts } from './push-target.ts';
import { Committer, type CommitterOptions } from './committer.ts';
import { badRequest, invocationNotFound, LakeshoreError } from './errors.ts';
import { DEFAULT_LIMITS, MAX_NAMED_QUEUES, type Limits } from './limits.ts';
import { outcomeOf } from './rows.ts';
import { isTerminal } from './states.ts';
import { stmt, type Port } from './port.ts';
import { DEFAULT_STORAGE_LIMIT_BYTES, StorageBudget, type StorageOptions, type StorageState } from './storage.ts';
import { cancelPlan } from './sql/cancel.ts';
import { countPlan, getManyPlan, getPlan, queueOfPlan, queuesPagePlan, queuesPlan } from './sql/read.ts';
import type { PushStats } from './push.ts';
import { type InvocationSummary, listPlan, overviewPlan, type Page, type QueueOverview } from './sql/list.ts';
import { submitPlan, type Created, type SubmitInput, type Submitted } from './sql/submit.ts';
import { retryPlan } from './sql/retry.ts';
import { deletePlan } from './sql/delete.ts';
import { Admin } from './admin.ts';
import { HintBook } from './hints.ts';
import type { Invocation, Outcome } from './types.ts';
import * as v from './validate.ts';
import { submitInput, type SettingsRequest, type SubmitRequest } from './requests.ts';
import { failed, fill, one, parseEach, type Settled } from './settled.ts';
import { keys } from './waiters.ts';
import { Journal } from './journal.ts';
import { waitForAny, type Ended, type ResultsAnswer } from './results.ts';
import { EndsLog } from './ends.ts';
import { Parking } from './park.ts';
import { Work } from './work.ts';

export interface EngineOptions {
  limits?: Partial<Limits>;
  now?: () => number;
  random?: () => number;
  committer?: CommitterOptions;
  /**
   * Told of every moment a queue must be looked at again (a lease deadline, a delayed job due, a
   * TTL, a schedule tick), so a plane can arm a timer at the earliest: the Durable Object's alarm.
   */
  onWake?: (ns: string, queue: string, at: number) => void;
  /** Told when a job of `queue` failed for good: a plane wakes claims parked on its dead-letter queue, if any. */
  onFailed?: (ns: string, queue: string) => void;
  /** The database's storage budget (storage.ts): past its high-water mark submits are refused. Default: 10 GB, 90 %. */
  storage?: StorageOptions;
  /**
   * The plane is the single writer of its queues (the queue's Durable Object): it keeps hints of
   * their timing and settings, and claims leave out the statements that cannot do anything (hints.ts).
   */
  singleWriter?: boolean;
  /** Where push targets may point: `local` (default; http on loopback too) or `public` (a deployed plane). */
  pushHosts?: PushHosts;
  /** The service bindings push targets may name (admin.ts). */
  pushServices?: readonly string[];
}

export class Engine {
  readonly limits: Limits;
  readonly committer: Committer;
  readonly park: Parking;
  /** The workers' verbs: claim, ack, nack, heartbeat, expire (work.ts). */
  readonly work: Work;
  /** The journal's verbs: append, read, follow, trim (journal.ts). */
  readonly journal: Journal;
  /** The operators' verbs on a queue: settings, pause, redrive, schedules (admin.ts). */
  readonly admin: Admin;
  private readonly now: () => number;
  private readonly onWake: EngineOptions['onWake'];
  /** A single writer's hints of its queues (hints.ts), or none. */
  readonly hints: HintBook | undefined;
  /** The database's storage budget: every batch tells it the database's size. */
  readonly storage: StorageBudget;
  /** The pushers running on this engine, by `ns\0queue`: the overview tells their figures. */
  readonly pushers = new Map<string, { stats(): PushStats }>();

  constructor(port: Port, opts: EngineOptions = {}) {
    this.limits = { ...DEFAULT_LIMITS, ...opts.limits };
    this.now = opts.now ?? Date.now;
    this.storage = new StorageBudget(opts.storage ?? { limitBytes: DEFAULT_STORAGE_LIMIT_BYTES }, this.now);
    const told = opts.committer?.onBatch;
    this.committer = new Committer(port, {
      ...opts.committer,
      onBatch: (results, plans) => {
        this.storage.observe(results);
        told?.(results, plans);
      },
    });
    this.park = new Parking(this.committer, this.now);
    if (opts.singleWriter) this.park.ends = new EndsLog();
    this.onWake = opts.onWake;
    this.hints = opts.singleWriter ? new HintBook() : undefined;
    const parts = {
      committer: this.committer,
      park: this.park,
      limits: this.limits,
      now: this.now,
      onWake: opts.onWake,
      hints: this.hints,
      admitWork: () => this.admitWork(),
      pushHosts: opts.pushHosts,
      pushServices: opts.pushServices,
    };
    this.work = new Work({ ...parts, random: opts.random ?? Math.random, onFailed: opts.onFailed });
    this.journal = new Journal(this.committer, this.park, this.limits, this.now);
    this.admin = new Admin(parts);
  }

  // ---------------------------------------------------------------- producers

  async submit(ns: string, queue: string, req: SubmitRequest): Promise<Submitted> {
    return one(await this.submitted(ns, v.queue(queue, this.limits), [submitInput(req, this.limits, this.now())]));
  }

  /** Submits many: each item keeps its own id, key, idempotency and error; valid ones go in few set-based INSERTs. */
  async submitMany(ns: string, queue: string, items: SubmitRequest[]): Promise<Settled<Submitted>[]> {
    const q = v.queue(queue, this.limits);
    const now = this.now();
    const batch = v.batch(items, this.limits);
    // Past the storage high-water mark the batch is refused whole: every item answers storage_full.
    const full = await this.admitWork().then(
      () => null,
      (e: unknown) => (e instanceof LakeshoreError && e.code === 'storage_full' ? e : Promise.reject(e)),
    );
    if (full) return batch.map(() => failed(full));
    const { out, valid, at } = parseEach(batch, (it) => submitInput(it, this.limits, now));
    return fill(out, at, valid.length ? await this.submitted(ns, q, valid) : []);
  }

  /** The database's storage against its budget, its size read again if the last one is stale. */
  async storageState(): Promise<StorageState> {
    if (!this.storage.fresh) await this.committer.run({ stmts: [stmt('SELECT 1')], done: () => undefined });
    return this.storage.state();
  }

  /**
   * Refuses new work (storage_full) while the database is past its storage high-water mark, as
   * its last batch reported it: no extra round trip. Another writer may have filled the database
   * since; this one learns it from its own next batch, and the mark leaves room for that one.
   */
  async admitWork(): Promise<void> {
    this.storage.admit();
  }

  /** Inserts; claims parked on the queue ride along for what was queued; a delayed row or a TTL arms the queue's timer. */
  private async submitted(ns: string, q: string, inputs: SubmitInput[]): Promise<(Submitted | Error)[]> {
    await this.admitWork();
    const created = (r: Created | Submitted | Error): r is Created => !(r instanceof Error) && r.created;
    const plan = submitPlan(this.now(), ns, q, inputs);
    // Told as the batch commits, so before the claims that ride along with it are.
    const telling: typeof plan = {
      stmts: plan.stmts,
      done: (rs) => {
        const out = plan.done(rs);
        if (Array.isArray(out)) {
          // Envelopes only while anyone listens: a record then carries its trace id.
          const env = this.park.events.listening ? new Map(inputs.map((i) => [i.id, i.envelope])) : null;
          this.park.events.told(
            ns,
            q,
            out
              .filter(created)
              .map((r) => ({ id: r.id, status: r.queued ? 'queued' : 'delayed', attempt: 0, submitted: true, envelope: env?.get(r.id) })),
          );
        }
        return out;
      },
    };
    const out = await this.park.feed(ns, q, telling, inputs.length, (rs) => rs.filter((r) => created(r) && r.queued).length);
    for (const r of out.filter(created)) {
      this.hints?.sooner(ns, q, 'due', r.runAt);
      this.hints?.sooner(ns, q, 'ttl', r.expiresAt);
      const at = Math.min(r.runAt ?? Infinity, r.expiresAt ?? Infinity);
      if (at < Infinity) this.onWake?.(ns, q, at);
    }
    return out.map((r) => (r instanceof Error ? r : { id: r.id, created: r.created }));
  }

  /**
   * Retries a failed invocation: it goes back to queued with a fresh attempt budget, keeping its id
   * and its journal. Anything but a failed invocation is a 409.
   */
  async retry(ns: string, id: unknown, queue: string | null = null): Promise<void> {
    const invId = v.id(id, this.limits);
    const out = await this.committer.run(retryPlan(this.now(), ns, invId, queue));
    this.park.events.told(ns, out.queue, [{ id: invId, status: 'queued' }]);
    this.park.wake(keys.queue(ns, out.queue), 1);
  }

  /** Deletes a finished invocation and its frames; anything not finished is a 409 (cancel it first). */
  async delete(ns: string, id: unknown, queue: string | null = null): Promise<void> {
    await this.committer.run(deletePlan(ns, v.id(id, this.limits), queue));
  }

  async cancel(ns: string, id: unknown, queue: string | null = null): Promise<boolean> {
    const out = await this.committer.run(cancelPlan(this.now(), ns, v.id(id, this.limits), queue));
    if (out.cancelled) {
      this.park.events.told(ns, out.queue, [{ id: String(id), status: 'cancelled' }]);
      this.park.ended(ns, out.queue, String(id));
    }
    return out.cancelled;
  }

  get = async (ns: string, id: unknown, queue: string | null = null): Promise<Invocation | null> =>
    this.committer.run(getPlan(ns, v.id(id, this.limits), queue));
  /** Up to 1,000 jobs' rows without envelope and result, in the order asked; null where there is no such job. */
  getMany = async (ns: string, ids: unknown): Promise<(InvocationSummary | null)[]> =>
    this.committer.run(getManyPlan(ns, JSON.stringify(this.idList(ids))));
  /** A list of 1 to LIMIT_MAX_BATCH invocation ids, each checked. */
  private idList(ids: unknown): string[] {
    if (!Array.isArray(ids) || !ids.length) throw badRequest('ids must be a list of one or more invocation ids');
    return v.batch(ids, this.limits).map((id) => v.id(id, this.limits));
  }
  queueOf = async (ns: string, id: unknown): Promise<string | null> => this.committer.run(queueOfPlan(ns, v.id(id, this.limits)));
  count = async (ns: string, queue: unknown, state?: unknown): Promise<number> =>
    this.committer.run(countPlan(ns, v.queue(queue, this.limits), v.state(state, 'queued')));
  /** The queues of a namespace that ever held work or settings. */
  queues = async (ns: string): Promise<string[]> => this.committer.run(queuesPlan(ns));
  /**
   * A page of those, in name order after `after` (none or '' for the first): `limit` of them (1 to
   * `most`, the default: MAX_NAMED_QUEUES for a view that asks each queue's object, MAX_QUEUE_NAMES
   * for the names alone), and the name to pass as `after` next (null after the last).
   */
  async queuesPage(
    ns: string,
    after?: unknown,
    limit?: unknown,
    most = MAX_NAMED_QUEUES,
  ): Promise<{ queues: string[]; next: string | null }> {
    const from = after === undefined || after === null || after === '' ? '' : v.queue(after, this.limits);
    const size = v.intInRange('limit', limit, most, 1, most);
    return await this.committer.run(queuesPagePlan(ns, from, size));
  }

  /** One page of the namespace's queues' overviews (queuesPage's), and where the next starts. */
  async overviewPage(ns: string, after?: unknown, limit?: unknown): Promise<{ queues: QueueOverview[]; next: string | null }> {
    const page = await this.queuesPage(ns, after, limit);
    return { queues: page.queues.length ? await this.overview(ns, page.queues) : [], next: page.next };
  }

  /**
   * Each queue of the namespace (or those named): counts per state, its oldest waiting job,
   * settings (sql/list.ts), and the jobs finished lately by this engine's transitions.
   */
  async overview(ns: string, queues?: unknown[]): Promise<QueueOverview[]> {
    const names = queues?.length ? queues.map((q) => v.queue(q, this.limits)) : await this.queues(ns);
    const rows = names.length ? await this.committer.run(overviewPlan(this.now(), ns, names)) : [];
    return rows.map((o) => ({
      ...o,
      recent: this.park.events.recent(ns, o.queue),
      pushing: this.pushers.get(`${ns}\0${o.queue}`)?.stats() ?? null,
    }));
  }

  /** A page of a queue's invocations in one state (sql/list.ts): `limit` at most 1,000 (default 50). */
  list = async (ns: string, queue: unknown, state: unknown, limit?: unknown, cursor?: unknown): Promise<Page> =>
    this.committer.run(
      listPlan(
        ns,
        v.queue(queue, this.limits),
        v.state(state, 'queued'),
        v.intInRange('limit', limit, 50, 1, 1000),
        v.optionalText('cursor', cursor, 500),
      ),
    );

  /** Waits until the invocation is terminal, up to `timeoutMs`; then answers its outcome. */
  async result(ns: string, id: unknown, timeoutMs?: unknown, signal?: AbortSignal, queue: string | null = null): Promise<Outcome> {
    const invId = v.id(id, this.limits);
    const wait = v.waitMs('timeout', timeoutMs, 30_000, this.limits.maxResultWaitMs);
    let last: Invocation | null = null;
    const look = async () => {
      last = await this.get(ns, invId, queue);
      if (!last) throw invocationNotFound(invId);
      return isTerminal(last.state)
        ? outcomeOf({ state: last.state, result: last.result, error: last.error ? JSON.stringify(last.error) : null })
        : undefined;
    };
    return this.park.until({
      key: keys.inv(ns, invId),
      deadline: this.now() + wait,
      signal,
      look,
      gaveUp: async () => (await look()) ?? { state: last!.state as 'delayed' | 'queued' | 'running', timedOut: true },
    });
  }

  /**
   * Waits on many jobs of `queue` at once (results.ts): answers those that have ended, and those
   * the queue does not have, as soon as there is any; none once `timeoutMs` passed. `after`: the
   * cursor of this caller's last answer (a hint: one this plane cannot read means a full look).
   */
  async results(
    ns: string,
    queue: unknown,
    ids: unknown,
    timeoutMs?: unknown,
    signal?: AbortSignal,
    after?: unknown,
  ): Promise<ResultsAnswer> {
    const q = v.queue(queue, this.limits);
    const distinct = [...new Set(this.idList(ids))];
    const wait = v.waitMs('timeout', timeoutMs, 30_000, this.limits.maxResultWaitMs);
    const cursor = v.optionalText('after', after, 100);
    const deadline = this.now() + wait;
    return waitForAny({
      committer: this.committer,
      waiters: this.park.waiters,
      now: this.now,
      ns,
      queue: q,
      ids: distinct,
      deadline,
      signal,
      ends: this.park.ends,
      after: cursor,
    });
  }
}

export type { Submitted, Settled, SubmitRequest, SettingsRequest, Ended, ResultsAnswer };
export type { ClaimRequest, HolderRequest, AckRequest, NackRequest, AppendRequest } from './requests.ts';
export type { Appended } from './sql/append.ts';
export type { Page, QueueOverview, InvocationSummary } from './sql/list.ts';
