/**
 * The jobs a single writer ended lately, in order, so that a wait on many jobs asked again (a
 * client's next round of `results`) reads again only the rows of jobs that ended since its last
 * answer, not every job it waits on (results.ts). A cursor names this log (its instance) and a
 * point in it; one the log no longer covers (another instance, a point overwritten, or a point
 * before the log was last cleared) answers null, and the wait reads every row, as without one.
 *
 * Every end of a job wakes its key (Parking.finished), and this log is told at that same moment;
 * a plane whose rows another process may change (the local planes) keeps none (see Engine).
 */
const CAPACITY = 16_384;

export class EndsLog {
  private readonly instance = Math.random().toString(36).slice(2, 10);
  private readonly keys: string[] = new Array(CAPACITY);
  /** Ends noted so far: the next one's number. */
  private next = 0;
  /** The first number the log vouches for (cleared: everything before is unknown). */
  private floor = 0;

  noted(key: string): void {
    this.keys[this.next % CAPACITY] = key;
    this.next++;
  }

  /** Forgets what it knew: another process changed the rows (Parking.wakeAll). */
  clear(): void {
    this.floor = this.next;
  }

  /** A cursor for now: what a wait that looks after this moment hands its caller. */
  mark(): string {
    return `${this.instance}.${this.next}`;
  }

  /** The keys ended at or after `cursor`, or null when the log cannot say (a full look then). */
  since(cursor: unknown): Set<string> | null {
    if (typeof cursor !== 'string') return null;
    const [instance, at] = cursor.split('.');
    const from = Number(at);
    if (instance !== this.instance || !Number.isSafeInteger(from) || from > this.next) return null;
    if (from < this.floor || from < this.next - CAPACITY) return null;
    const out = new Set<string>();
    for (let n = from; n < this.next; n++) out.add(this.keys[n % CAPACITY]!);
    return out;
  }
}
