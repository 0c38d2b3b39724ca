/**
 * What one step of a long job on D1 may ask (a namespace's move: mover.ts): Cloudflare bounds the
 * queries and calls of one invocation, so each step counts what it asks on a `Meter` before it
 * asks, and reaches each database through `Metered`, which counts every statement, alone or in a
 * batch, and the rows D1 says it read.
 */

/** Most bytes bound in one D1 batch of inserts. */
const BATCH_BYTES = 4 << 20;

/** What a step may still ask: each statement, alone or in a batch, and each call of a queue object is one. */
export class Meter {
  used = 0;
  rowsRead = 0;
  readonly budget: number;
  constructor(budget: number) {
    this.budget = budget;
  }
  get left(): number {
    return this.budget - this.used;
  }
}

export interface Stmt {
  sql: string;
  args: unknown[];
  bytes?: number;
}

/** A shard as a step reaches it: every statement counted on the step's meter, with the rows D1 says it read. */
export class Metered {
  readonly db: D1Database;
  private readonly meter: Meter;
  constructor(db: D1Database, meter: Meter) {
    this.db = db;
    this.meter = meter;
  }

  async all<T = Record<string, unknown>>(sql: string, ...args: unknown[]): Promise<T[]> {
    return (await this.batch([{ sql, args }]))[0]!.results as T[];
  }

  async first<T = Record<string, unknown>>(sql: string, ...args: unknown[]): Promise<T | null> {
    return (await this.all<T>(sql, ...args))[0] ?? null;
  }

  /** Runs statements in D1 batches of at most BATCH_BYTES bound (and 50 statements); answers every result in order. */
  batch(stmts: Stmt[]): Promise<D1Result[]> {
    return this.groups(stmts.map((s) => [s]));
  }

  /**
   * Runs groups of statements in D1 batches as `batch` does, a group never split across two (a D1
   * batch is one transaction: a job's old copy deleted and its new one written land together). A
   * group past the bounds goes alone. Answers every statement's result in order.
   */
  async groups(groups: Stmt[][]): Promise<D1Result[]> {
    const out: D1Result[] = [];
    const size = (g: Stmt[]) => g.reduce((n, s) => n + (s.bytes ?? 0), 0);
    for (let i = 0; i < groups.length; ) {
      const part: Stmt[] = [...groups[i]!];
      let bytes = size(groups[i++]!);
      while (i < groups.length && part.length + groups[i]!.length <= 50 && bytes + size(groups[i]!) <= BATCH_BYTES) {
        bytes += size(groups[i]!);
        part.push(...groups[i++]!);
      }
      this.meter.used += part.length;
      const rs = await this.db.batch(part.map((s) => this.db.prepare(s.sql).bind(...s.args)));
      for (const r of rs) this.meter.rowsRead += r.meta?.rows_read ?? 0;
      out.push(...rs);
    }
    return out;
  }
}
