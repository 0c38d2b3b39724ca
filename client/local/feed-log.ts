/**
 * The local plane's lifecycle feed across processes. While any process reads a namespace's feed
 * (its row in `local_feed_readers`, renewed every second), each process on the file puts the
 * records of its own transitions in `local_feed` (src/core/schema.ts), and a reader follows the
 * table by `seq`, so it sees every process's records, a Python one's too (feed_log.py keeps the
 * same tables). With no reader no record is made or written, as on the edge plane.
 *
 * A transition's records are in its commit's place. Every batch that changes a row takes a place
 * in the table inside its own transaction, a slot (record ''): its records are told only after it
 * committed, but then fill the slot (by the next batch, or a transaction of their own by the next
 * turn of the loop). So a record another process makes because of it (the claim of a job just
 * submitted) comes after it in `seq`, whichever process writes first. A reader that comes to a
 * slot not yet filled waits for it, up to HOLD_MS (its writer is gone: the slot is passed).
 * A slot holds its records as one JSON array; records told with no batch of their own (a worker's,
 * a log line) are rows of their own.
 *
 * Writers look for readers every NOTICE_MS; a reader starts reading NOTICE_MS after it put its row
 * in, so from its start on it misses no process's records. A reader polls every FOLLOW_POLL_MS and
 * is woken at once by its own process's records. The table keeps the last KEEP records; a reader
 * that falls further behind is told a `gap` (`behind`).
 */
import { stmt } from '../../src/core/port.ts';
import type { Feed, FeedRecord } from '../../src/core/feed.ts';
import type { FeedItem } from '../types.ts';
import type { SqlitePort } from './sqlite-port.ts';
import { randomId } from '../ids.ts';

/** How often a reader looks for other processes' records. */
export const FOLLOW_POLL_MS = 50;
/** How often a process looks for readers; a new reader waits this long (and a little) before it starts. */
export const NOTICE_MS = 250;
/** A reader renews its row this often; a row not renewed lapses after READER_TTL_MS. */
const RENEW_MS = 1_000;
const READER_TTL_MS = 5_000;
/** Records kept: older ones are deleted as new ones come (every TRIM_EVERY writes). */
export const KEEP = 100_000;
const TRIM_EVERY = 1_000;
const PAGE = 1_000;
/** How long a reader waits for a slot to be filled before it passes it (its writer is gone). */
export const HOLD_MS = 3_000;

export class FeedLog {
  private readonly port: SqlitePort;
  private readonly feed: Feed;
  private readonly ns: string;
  private writes = 0;
  private flushing = false;
  /** This process's slots not yet filled, with the records told since each committed. */
  private readonly slots = new Map<number, FeedRecord[]>();
  /** The slot of this process's last batch, while it takes records. */
  private slot: number | null = null;
  private filling = false;
  /** This process's readers: while there are some, it writes without asking the file. */
  private ownReaders = 0;
  private off: (() => void) | null = null;
  private readonly looking: ReturnType<typeof setInterval>;
  /** Wakes this process's readers when its own records are written. */
  private readonly waiting = new Set<() => void>();

  constructor(port: SqlitePort, feed: Feed, ns: string) {
    this.port = port;
    this.feed = feed;
    this.ns = ns;
    this.look();
    this.looking = setInterval(() => this.look(), NOTICE_MS);
    (this.looking as { unref?: () => void }).unref?.();
  }

  /** Writes the feed's records while some process reads this namespace's feed; stops when none does. */
  private look(): void {
    let read = this.ownReaders > 0;
    if (!read) {
      try {
        read =
          this.port.read(stmt('SELECT 1 AS x FROM local_feed_readers WHERE ns = ?1 AND until > ?2 LIMIT 1', this.ns, Date.now())).length >
          0;
      } catch {
        read = false; // the file is busy or closing: look again next time
      }
    }
    if (read && !this.off) {
      this.off = this.feed.on((ns, records) => this.write(ns, records));
      process.on('exit', this.atExit);
      this.port.seal = {
        stmt: stmt(`INSERT INTO local_feed (ns, queue, record) VALUES (?1, '', '') RETURNING seq`, this.ns),
        sealed: (rows) => this.sealed(Number(rows[0]?.seq)),
      };
    } else if (!read && this.off) {
      this.off();
      this.off = null;
      this.port.seal = null;
      process.off('exit', this.atExit);
    }
  }

  /** A process that exits without closing its plane still fills its slots (the port is synchronous). */
  private readonly atExit = (): void => {
    this.fill();
    if (!this.port.riders.length) return;
    try {
      this.port.db.exec('PRAGMA busy_timeout = 1000'); // waits inside SQLite: the loop will not turn again
      this.port.batchSync([]);
    } catch {
      /* the lock is another process's, or the file is closed: readers pass the slots */
    }
  };

  /** Stops writing; the slots taken are filled first (a command that exits right after its verb loses no record). */
  async close(): Promise<void> {
    clearInterval(this.looking);
    this.off?.();
    this.off = null;
    this.port.seal = null;
    process.off('exit', this.atExit);
    this.fill();
    if (this.port.riders.length) await this.port.batch([]).catch(() => {});
  }

  /** A batch committed with its slot: what is told from now until the loop's next turn goes in it. */
  private sealed(seq: number): void {
    if (!Number.isSafeInteger(seq)) return;
    this.slots.set(seq, []);
    this.slot = seq;
    if (!this.filling) {
      this.filling = true;
      setImmediate(() => {
        this.filling = false;
        this.fill();
        this.push();
      });
    }
  }

  /** The slots taken, filled with their records (or given back, with none), riding the next batch. */
  private fill(): void {
    this.slot = null;
    for (const [seq, records] of this.slots) {
      this.writes += records.length;
      this.port.riders.push(
        records.length
          ? stmt('UPDATE local_feed SET record = ?2 WHERE seq = ?1', seq, JSON.stringify(records))
          : stmt('DELETE FROM local_feed WHERE seq = ?1', seq),
      );
    }
    this.slots.clear();
  }

  /**
   * Records told: into the slot of the batch that made them when it is still taking records (told
   * right after its commit), else rows of their own. Written at once, in a transaction of their
   * own, when the file's write lock is free; else they ride in this process's next storage batch
   * (sqlite-port.ts), or one of their own by the next turn of the event loop. The feed is never
   * load-bearing: a failed write loses its records (a reader passes their slot), nothing else.
   */
  private write(ns: string, records: FeedRecord[]): void {
    if (!records.length) return;
    const slot = this.slot !== null && ns === this.ns ? this.slots.get(this.slot) : undefined;
    if (slot) {
      for (const r of records) slot.push(r);
      return; // filled by the next turn of the loop (sealed)
    }
    this.port.riders.push(
      stmt(
        `INSERT INTO local_feed (ns, queue, record) SELECT ?1, value ->> '$.queue', value FROM json_each(?2)`,
        ns,
        JSON.stringify(records),
      ),
    );
    this.writes += records.length;
    this.push();
  }

  /** Writes the riders now if the lock is free, else soon. */
  private push(): void {
    if (this.writes >= TRIM_EVERY) {
      this.writes = 0;
      this.port.riders.push(stmt('DELETE FROM local_feed WHERE seq <= (SELECT max(seq) FROM local_feed) - ?1', KEEP));
    }
    if (!this.port.riders.length) return;
    try {
      this.port.db.exec('PRAGMA busy_timeout = 1000'); // waits inside SQLite: the loop will not turn again
      this.port.batchSync([]);
      for (const wake of this.waiting) wake();
      return;
    } catch {
      /* the lock is another process's (or the file is closing): the riders stay for the next batch */
    }
    if (!this.flushing) {
      this.flushing = true;
      setTimeout(() => void this.flush(), 0);
    }
  }

  private async flush(): Promise<void> {
    try {
      if (this.port.riders.length) await this.port.batch([]).catch(() => {});
    } finally {
      this.flushing = false;
      for (const wake of this.waiting) wake();
    }
  }

  /**
   * Records of `queue` (null: every queue of the namespace) from the reader's start on, until
   * `signal` aborts. It starts NOTICE_MS after its first read is asked for: by then every process
   * on the file writes its records.
   */
  async *follow(queue: string | null, kinds: Set<string>, signal?: AbortSignal): AsyncGenerator<FeedItem> {
    const reader = `${randomId()}`;
    const renew = () =>
      this.port.batch([
        stmt(
          'INSERT INTO local_feed_readers (reader, ns, until) VALUES (?1, ?2, ?3) ON CONFLICT (reader) DO UPDATE SET until = excluded.until',
          reader,
          this.ns,
          Date.now() + READER_TTL_MS,
        ),
      ]);
    this.ownReaders++;
    this.look();
    let wake: (() => void) | null = null;
    const nudge = () => wake?.();
    this.waiting.add(nudge);
    signal?.addEventListener('abort', nudge, { once: true });
    const renewing = setInterval(() => void renew().catch(() => {}), RENEW_MS);
    (renewing as { unref?: () => void }).unref?.();
    const pause = (ms: number) =>
      new Promise<void>((r) => {
        wake = r;
        setTimeout(r, ms);
      }).then(() => {
        wake = null;
      });
    try {
      // Its place is taken as its row goes in: what any process writes from then on is read. The
      // first read waits until every process has noticed the row (not woken early by this
      // process's own records), so from then on none is missing.
      let last = Number(this.port.read(stmt('SELECT coalesce(max(seq), 0) AS seq FROM local_feed'))[0]!.seq);
      let holding = null as { seq: number; since: number } | null;
      await renew();
      await new Promise<void>((r) => setTimeout(r, NOTICE_MS + 50));
      while (!signal?.aborted) {
        // Plain reads, no write lock: a reader never holds a writer up.
        const page = this.port.read(
          stmt(
            'SELECT seq, queue, record FROM local_feed INDEXED BY local_feed_ns WHERE ns = ?1 AND seq > ?2 ORDER BY seq LIMIT ?3',
            this.ns,
            last,
            PAGE,
          ),
        );
        // Trimmed past where this reader was: records were missed. Said once, from where the table starts now.
        const first = Number(this.port.read(stmt('SELECT coalesce(min(seq), 0) AS seq FROM local_feed'))[0]!.seq);
        if (first > last + 1 && last > 0) {
          yield { kind: 'gap', reason: 'behind' };
          last = Math.max(last, first - 1);
        }
        let held = false;
        for (const row of page) {
          const text = String(row.record);
          if (text === '') {
            // A slot its writer has not filled yet: what follows waits for it, up to HOLD_MS.
            const seq = Number(row.seq);
            if (holding?.seq !== seq) holding = { seq, since: Date.now() };
            if (Date.now() - holding.since < HOLD_MS) {
              held = true;
              break;
            }
            last = seq;
            continue;
          }
          last = Number(row.seq);
          const records = (text.startsWith('[') ? JSON.parse(text) : [JSON.parse(text)]) as FeedRecord[];
          for (const r of records) if ((queue === null || r.queue === queue) && kinds.has(r.kind)) yield r;
        }
        if (held || page.length < PAGE) await pause(FOLLOW_POLL_MS);
      }
    } finally {
      clearInterval(renewing);
      this.waiting.delete(nudge);
      signal?.removeEventListener('abort', nudge);
      this.ownReaders--;
      await this.port.batch([stmt('DELETE FROM local_feed_readers WHERE reader = ?1', reader)]).catch(() => {});
      this.look();
    }
  }
}
