/** The local plane's retention (core/sql/purge.ts): when each queue's next purge pass is due, and the pass. */
import type { Engine } from '../../src/core/engine.ts';

export class LocalRetention {
  /** Per queue, when retention next has work (the last purge pass found); absent: unknown, a pass is due. */
  private readonly at = new Map<string, number | null>();
  private readonly engine: Engine;
  private readonly now: () => number;

  constructor(engine: Engine, now: () => number) {
    this.engine = engine;
    this.now = now;
  }

  /** A job finished (or the retention changed): true when a pass should run soon (none is known to be due). */
  unknown(ns: string, queue: string, changed = false): boolean {
    const key = `${ns}\u0000${queue}`;
    if (!changed && this.at.get(key) !== undefined && this.at.get(key) !== null) return false;
    this.at.delete(key);
    return true;
  }

  /** Runs a pass when one is due: bounded batches of finished jobs past retention, deleted with their frames. Answers when the next is due, or null. */
  async due(ns: string, queue: string): Promise<number | null> {
    const key = `${ns}\u0000${queue}`;
    const at = this.at.get(key);
    if (at === null || (at !== undefined && at > this.now())) return at;
    let out = await this.engine.admin.purge(ns, queue);
    for (let round = 1; out.more && round < 20; round++) out = await this.engine.admin.purge(ns, queue);
    const next = out.more ? this.now() + 1000 : out.nextAt;
    this.at.set(key, next);
    return next;
  }
}
