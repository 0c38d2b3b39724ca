/**
 * When a queue's next retention pass is due (sql/purge.ts), for the plane that runs it (the queue
 * object's alarm, the local plane's queue timer). A pass finds the next time; until one has run,
 * or after the retention changed, a finished job asks for one at once.
 */
import type { Purged } from './sql/purge.ts';

/** Retention batches one pass runs at most (each up to PURGE_BATCH jobs per finished state). */
export const PURGE_ROUNDS = 20;

export class RetentionClock {
  /** When the next pass is due, as the last pass found (`known`); null: nothing finished is kept. */
  private at: number | null = null;
  private known = false;
  /** The queue's journal_retention_ms as the last pass found it: a job's frames may be due that long after it finishes. */
  private window: number | null = null;
  private readonly purge: () => Promise<Purged>;
  private readonly now: () => number;
  /** Arms the plane's timer for a moment. */
  private readonly arm: (at: number) => void;

  constructor(purge: () => Promise<Purged>, now: () => number, arm: (at: number) => void) {
    this.purge = purge;
    this.now = now;
    this.arm = arm;
  }

  /**
   * A job finished (or, `changed`, the retention did): unless a pass is due at a known time, one
   * runs now. With a pass known, a finished job's frames may still come due before it (the queue's
   * journal retention is shorter than the wait): then the pass is brought forward to then.
   */
  soon(changed = false): void {
    if (!changed && this.known && this.at !== null) {
      if (this.window === null) return;
      const frames = this.now() + this.window;
      if (frames >= this.at) return;
      this.at = frames;
      this.arm(frames);
      return;
    }
    this.known = false;
    this.at = this.now();
    this.arm(this.at);
  }

  /**
   * Runs a pass when one is due (or none has run yet): bounded batches, each its own storage batch
   * among the transitions; at most PURGE_ROUNDS, then the rest a second later. Answers when the next
   * is due, or null.
   */
  async due(): Promise<number | null> {
    if (this.known && (this.at === null || this.at > this.now())) return this.at;
    let out = await this.purge();
    for (let round = 1; out.more && round < PURGE_ROUNDS; round++) out = await this.purge();
    this.window = out.journalRetentionMs;
    this.at = out.more ? this.now() + 1000 : out.nextAt;
    this.known = true;
    if (this.at !== null) this.arm(this.at);
    return this.at;
  }
}
