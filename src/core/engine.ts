/**
 * The contract, executable over any storage port. The queue Durable Object runs it over D1, the
 * local plane over node:sqlite. It validates input, runs each verb's plan through group commit,
 * parks waiters (park.ts) and wakes them after the transition that satisfies them. Here are the
 * producers' verbs; the workers' are `engine.work` (work.ts), the journal's `engine.journal`
 * (journal.ts). Every verb is async: a bad argument is a rejected promise, never a throw.
 */
import { Committer, type CommitterOptions } from './committer.ts';
import { notFound } from './errors.ts';
import { DEFAULT_LIMITS, type Limits } from './limits.ts';
import { outcomeOf } from './rows.ts';
import { isTerminal } from './states.ts';
import type { Port } from './port.ts';
import { cancelPlan } from './sql/cancel.ts';
import { configurePlan } from './sql/configure.ts';
import { countPlan, getPlan, queueOfPlan, queuesPlan } from './sql/read.ts';
import { submitPlan, type SubmitInput, type Submitted } from './sql/submit.ts';
import type { Invocation, Outcome } from './types.ts';
import * as v from './validate.ts';
import { settingsInput, submitInput, type SettingsRequest, type SubmitRequest } from './requests.ts';
import { fill, one, parseEach, type Settled } from './settled.ts';
import { keys } from './waiters.ts';
import { Journal } from './journal.ts';
import { Parking } from './park.ts';
import { Work } from './work.ts';

export interface EngineOptions {
  limits?: Partial<Limits>;
  now?: () => number;
  random?: () => number;
  committer?: CommitterOptions;
  /** Told of every new lease deadline, so a plane can arm a timer (the Durable Object's alarm). */
  onLease?: (ns: string, queue: string, deadline: number) => void;
}

export class Engine {
  readonly limits: Limits;
  readonly committer: Committer;
  readonly park: Parking;
  /** The workers' verbs: claim, ack, nack, heartbeat, expire (work.ts). */
  readonly work: Work;
  /** The journal's verbs: append, read, follow, trim (journal.ts). */
  readonly journal: Journal;
  private readonly now: () => number;

  constructor(port: Port, opts: EngineOptions = {}) {
    this.limits = { ...DEFAULT_LIMITS, ...opts.limits };
    this.now = opts.now ?? Date.now;
    this.committer = new Committer(port, opts.committer);
    this.park = new Parking(this.committer, this.now);
    this.work = new Work({ committer: this.committer, park: this.park, limits: this.limits, now: this.now, random: opts.random ?? Math.random, onLease: opts.onLease });
    this.journal = new Journal(this.committer, this.park, this.limits, this.now);
  }

  // ---------------------------------------------------------------- producers

  async submit(ns: string, queue: string, req: SubmitRequest): Promise<Submitted> {
    return one(await this.submitted(ns, v.queue(queue, this.limits), [submitInput(req, this.limits)]));
  }

  /** Submits many: each item keeps its own id, key, idempotency and error; valid ones go in few set-based INSERTs. */
  async submitMany(ns: string, queue: string, items: SubmitRequest[]): Promise<Settled<Submitted>[]> {
    const q = v.queue(queue, this.limits);
    const { out, valid, at } = parseEach(v.batch(items, this.limits), (it) => submitInput(it, this.limits));
    return fill(out, at, valid.length ? await this.submitted(ns, q, valid) : []);
  }

  private submitted(ns: string, q: string, inputs: SubmitInput[]) {
    return this.park.feed(ns, q, submitPlan(this.now(), ns, q, inputs), inputs.length, (rs) => rs.filter((r) => !(r instanceof Error) && r.created).length);
  }

  async cancel(ns: string, id: unknown, queue: string | null = null): Promise<boolean> {
    const out = await this.committer.run(cancelPlan(this.now(), ns, v.id(id, this.limits), queue));
    if (out.cancelled) this.park.finished(ns, String(id));
    return out.cancelled;
  }

  get = async (ns: string, id: unknown, queue: string | null = null): Promise<Invocation | null> => this.committer.run(getPlan(ns, v.id(id, this.limits), queue));
  queueOf = async (ns: string, id: unknown): Promise<string | null> => this.committer.run(queueOfPlan(ns, v.id(id, this.limits)));
  count = async (ns: string, queue: unknown, state?: unknown): Promise<number> => this.committer.run(countPlan(ns, v.queue(queue, this.limits), v.state(state, 'queued')));
  /** The queues of a namespace that ever held work or settings. */
  queues = async (ns: string): Promise<string[]> => this.committer.run(queuesPlan(ns));

  /** Waits until the invocation is terminal, up to `timeoutMs`; then answers its outcome. */
  async result(ns: string, id: unknown, timeoutMs?: unknown, signal?: AbortSignal, queue: string | null = null): Promise<Outcome> {
    const invId = v.id(id, this.limits);
    const wait = v.waitMs('timeout', timeoutMs, 30_000, this.limits.maxResultWaitMs);
    let last: Invocation | null = null;
    const look = async () => {
      last = await this.get(ns, invId, queue);
      if (!last) throw notFound(`invocation ${JSON.stringify(invId)}`);
      return isTerminal(last.state) ? outcomeOf({ state: last.state, result: last.result, error: last.error ? JSON.stringify(last.error) : null }) : undefined;
    };
    return this.park.until({
      key: keys.inv(ns, invId), deadline: this.now() + wait, signal, look,
      gaveUp: async () => (await look()) ?? { state: last!.state as 'queued' | 'running', timedOut: true },
    });
  }

  async configure(ns: string, queue: unknown, cfg: SettingsRequest): Promise<void> {
    await this.committer.run(configurePlan(this.now(), ns, v.queue(queue, this.limits), settingsInput(cfg, this.limits)));
  }

}

export type { Submitted, Settled, SubmitRequest, SettingsRequest };
export type { ClaimRequest, HolderRequest, AckRequest, NackRequest, AppendRequest } from './requests.ts';
export type { Appended } from './sql/append.ts';
