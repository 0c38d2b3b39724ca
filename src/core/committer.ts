/**
 * Group commit. Plans that arrive while a batch is in flight wait and go to storage together as
 * one batch: one round trip, one transaction. Each plan keeps its own statements, guards and
 * answer. If a whole batch fails, its plans are retried one by one so a bad plan fails alone.
 */
import { toError } from './errors.ts';
import { Then, type Plan } from './plan.ts';
import type { Port, StmtResult } from './port.ts';

interface Pending {
  plan: Plan<unknown>;
  resolve: (v: unknown) => void;
  reject: (e: Error) => void;
}

export interface CommitterOptions {
  /** Most statements per batch; further plans wait for the next one. */
  maxStatements?: number;
  /** Added before each round trip, to simulate a storage that is far away (benchmarks only). */
  simulatedDelayMs?: number;
  /** Called after each batch with its results, for rows read/written accounting. */
  onBatch?: (results: StmtResult[], plans: number) => void;
}

export class Committer {
  private readonly port: Port;
  private readonly opts: Required<Omit<CommitterOptions, 'onBatch'>> & Pick<CommitterOptions, 'onBatch'>;
  private pending: Pending[] = [];
  private inFlight = false;

  constructor(port: Port, opts: CommitterOptions = {}) {
    this.port = port;
    this.opts = { maxStatements: opts.maxStatements ?? 400, simulatedDelayMs: opts.simulatedDelayMs ?? 0, onBatch: opts.onBatch };
  }

  run<T>(plan: Plan<T>): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      this.pending.push({ plan: plan as Plan<unknown>, resolve: resolve as (v: unknown) => void, reject });
      if (this.inFlight) return;
      // Plans started in the same turn (an ack batch and the claim riding with it) share a batch.
      this.inFlight = true;
      queueMicrotask(() => void this.flush());
    });
  }

  private async flush(): Promise<void> {
    try {
      while (this.pending.length) {
        const group = this.take();
        await this.commit(group);
      }
    } finally {
      this.inFlight = false;
    }
  }

  private take(): Pending[] {
    let n = 0;
    let count = 0;
    for (const p of this.pending) {
      if (count > 0 && n + p.plan.stmts.length > this.opts.maxStatements) break;
      n += p.plan.stmts.length;
      count++;
    }
    return this.pending.splice(0, count);
  }

  private async commit(group: Pending[]): Promise<void> {
    const stmts = group.flatMap((p) => p.plan.stmts);
    let results: StmtResult[] = [];
    if (stmts.length) {
      if (this.opts.simulatedDelayMs > 0) await new Promise((r) => setTimeout(r, this.opts.simulatedDelayMs));
      try {
        results = await this.port.batch(stmts);
      } catch (e) {
        if (group.length === 1) {
          group[0]!.reject(toError(e));
          return;
        }
        // One plan broke the transaction for all: isolate it by committing each alone.
        for (const p of group) await this.commit([p]);
        return;
      }
      this.opts.onBatch?.(results, group.length);
    }
    let at = 0;
    for (const p of group) {
      const mine = results.slice(at, at + p.plan.stmts.length);
      at += p.plan.stmts.length;
      try {
        const out = p.plan.done(mine);
        if (out instanceof Then) this.pending.push({ ...p, plan: out.plan as Plan<unknown> });
        else p.resolve(out);
      } catch (e) {
        p.reject(toError(e));
      }
    }
  }
}
