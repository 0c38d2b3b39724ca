/**
 * Group commit. Plans that arrive while a batch is in flight wait and go to storage together as
 * one batch: one round trip, one transaction. Each plan keeps its own statements, guards and
 * answer. If a whole batch fails, its plans are retried one by one so a bad plan fails alone.
 *
 * Pipelining (`depth` > 1): with storage far away (D1 from a Durable Object), one batch at a time
 * leaves the store idle for a round trip per batch. Up to `depth` batches may then be in flight.
 * Each was planned before any still in flight answered, so any order in which the store applies
 * them is a valid serialization: the callers of each were concurrent with all of them. Answers
 * are handed out in the order the batches were sent, whatever order they come back in.
 *
 * What a process remembers of its rows (hints.ts, tails.ts) must not trust that the store applied
 * two batches in flight together in the order they were sent. A plan run `alone` goes out only
 * once every batch before it answered, and no batch goes out while it is in flight: operators'
 * changes and journal reads and appends, whose answers update what is remembered in commit order.
 * Hints learned from a read are made safe another way (HintBook.learn replays what happened since).
 */
import { toError } from './errors.ts';
import { Then, type Plan } from './plan.ts';
import type { Port, StmtResult } from './port.ts';

interface Pending {
  plan: Plan<unknown>;
  alone: boolean;
  /** Waits for another plan to go with (RunOptions.patientMs); its timer ends the wait. */
  patient: ReturnType<typeof setTimeout> | null;
  resolve: (v: unknown) => void;
  reject: (e: Error) => void;
}

export interface CommitterOptions {
  /** Most statements per batch; further plans wait for the next one. */
  maxStatements?: number;
  /** Most batches in flight at once (default 1). */
  depth?: number;
  /** Added before each round trip, to simulate a storage that is far away (benchmarks only). */
  simulatedDelayMs?: number;
  /** Called after each batch with its results, for rows read/written accounting. */
  onBatch?: (results: StmtResult[], plans: number) => void;
}

export interface RunOptions {
  /** Sent with no other batch in flight (see above). */
  alone?: boolean;
  /**
   * Waits up to this long for a plan that is not patient, and goes in its batch (alone when the
   * time is up): for writes whose caller waits for company anyway (acks riding a parked claim).
   */
  patientMs?: number;
}

/** A plan's statements' results, or why its batch failed. */
type Outcome = { results: StmtResult[] } | { error: Error };

export class Committer {
  private readonly port: Port;
  private readonly opts: Required<Omit<CommitterOptions, 'onBatch'>> & Pick<CommitterOptions, 'onBatch'>;
  private pending: Pending[] = [];
  private inFlight = 0;
  /** A batch holding an `alone` plan is in flight. */
  private aloneInFlight = false;
  private scheduled = false;
  /** Settles once the last batch sent has handed out its answers. */
  private handed: Promise<void> = Promise.resolve();

  constructor(port: Port, opts: CommitterOptions = {}) {
    this.port = port;
    this.opts = {
      maxStatements: opts.maxStatements ?? 400,
      depth: Math.max(1, opts.depth ?? 1),
      simulatedDelayMs: opts.simulatedDelayMs ?? 0,
      onBatch: opts.onBatch,
    };
  }

  run<T>(plan: Plan<T>, opts: RunOptions = {}): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const p: Pending = {
        plan: plan as Plan<unknown>,
        alone: opts.alone ?? false,
        patient: null,
        resolve: resolve as (v: unknown) => void,
        reject,
      };
      if (opts.patientMs !== undefined && opts.patientMs > 0 && !p.alone) {
        p.patient = setTimeout(() => {
          p.patient = null;
          this.schedule();
        }, opts.patientMs);
      }
      this.pending.push(p);
      this.schedule();
    });
  }

  /** Plans started in the same turn (an ack batch and the claim riding with it) share a batch. */
  private schedule(): void {
    if (this.scheduled) return;
    this.scheduled = true;
    queueMicrotask(() => {
      this.scheduled = false;
      this.pump();
    });
  }

  private pump(): void {
    while (this.pending.length && this.inFlight < this.opts.depth && !this.aloneInFlight) {
      if (this.pending.every((p) => p.patient !== null)) return; // until company comes, or their time is up
      const n = this.size();
      const alone = this.pending.slice(0, n).some((p) => p.alone);
      if (alone && this.inFlight > 0) return; // sent once the batches in flight answered
      this.send(this.pending.splice(0, n), alone);
    }
  }

  /** How many pending plans the next batch takes. */
  private size(): number {
    let n = 0;
    let count = 0;
    for (const p of this.pending) {
      if (count > 0 && n + p.plan.stmts.length > this.opts.maxStatements) break;
      n += p.plan.stmts.length;
      count++;
    }
    return count;
  }

  private send(group: Pending[], alone: boolean): void {
    for (const p of group) {
      if (p.patient !== null) clearTimeout(p.patient);
      p.patient = null;
    }
    this.inFlight++;
    if (alone) this.aloneInFlight = true;
    const outcomes = this.commit(group);
    const before = this.handed;
    this.handed = (async () => {
      const got = await outcomes.catch((e: unknown) => group.map(() => ({ error: toError(e) })));
      await before;
      this.hand(group, got);
    })().finally(() => {
      this.inFlight--;
      if (alone) this.aloneInFlight = false;
      if (this.pending.length) this.schedule();
    });
  }

  /** Each plan's results: one batch, or each plan alone if the batch failed. */
  private async commit(group: Pending[]): Promise<Outcome[]> {
    const stmts = group.flatMap((p) => p.plan.stmts);
    if (!stmts.length) return group.map(() => ({ results: [] }));
    try {
      const results = await this.batch(stmts, group.length);
      let at = 0;
      return group.map((p) => ({ results: results.slice(at, (at += p.plan.stmts.length)) }));
    } catch (e) {
      if (group.length === 1) return [{ error: toError(e) }];
      // One plan broke the transaction for all: isolate it by committing each alone.
      const out: Outcome[] = [];
      for (const p of group) out.push(...(await this.commit([p])));
      return out;
    }
  }

  private async batch(stmts: Plan<unknown>['stmts'], plans: number): Promise<StmtResult[]> {
    if (this.opts.simulatedDelayMs > 0) await new Promise((r) => setTimeout(r, this.opts.simulatedDelayMs));
    const results = await this.port.batch(stmts);
    this.opts.onBatch?.(results, plans);
    return results;
  }

  private hand(group: Pending[], outcomes: Outcome[]): void {
    group.forEach((p, i) => {
      const o = outcomes[i]!;
      if ('error' in o) {
        p.reject(o.error);
        return;
      }
      try {
        const out = p.plan.done(o.results);
        if (out instanceof Then) this.pending.push({ ...p, plan: out.plan as Plan<unknown> });
        else p.resolve(out);
      } catch (e) {
        p.reject(toError(e));
      }
    });
  }
}
