/**
 * Copying a namespace's rows from one shard to another: the data half of a move (mover.ts runs the
 * protocol around it; copy-catch-up.ts copies again what was written since; shard-rows.ts deletes a
 * copy, copy-check.ts compares one), in units of bounded work. A move of a large namespace takes
 * many of the mover's invocations, and Cloudflare bounds what one invocation may ask of D1
 * (docs/deploy.md, "Moving a namespace"), so each unit says what it will cost before it runs
 * (metered.ts), and each resumes from a cursor the mover keeps between them.
 *
 * Every page is read along an index in its order (jobs by `(ns, id)`, a job's frames by its key),
 * so a unit reads the rows it copies and no others, however large the namespace or the shard. And
 * each unit may run again from the same cursor without harm (a restart between the copy and the
 * mover saving its cursor): a row already there is left as it is.
 *
 * Row numbers (`rid`) are the shard's own. A copied job keeps its distance from the namespace's
 * first one, whether it was there as the copy began or made since: the target reserves a block
 * above its highest row number, held by a placeholder row at its top, so the claim order (by row
 * number within a priority) and every frame's job follow without a map (Block). Columns and
 * values: copy-rows.ts.
 */
import { columnsOf, insertOf, selectList, type Columns } from './copy-rows.ts';
import type { Metered } from './metered.ts';
import { LakeshoreError } from '../core/errors.ts';

/** Rows read per page: a job holds up to 2 MiB (envelope and result), a frame 256 KiB. */
const JOBS_PER_PAGE = 16;
export const FRAMES_PER_PAGE = 64;
const ROWS_PER_PAGE = 64;

/** A cursor: where a phase goes on from (the last key it did), or null at its start. */
export type Cursor = (string | number)[] | null;

/**
 * Where the namespace's jobs go on the target: job `rid` of the source at `base + (rid - first)`,
 * those it had as the copy began (up to `hi`) and those made since alike, so the claim order (by
 * row number within a priority) and every frame's job follow without a map. The block is reserved
 * by a placeholder row above it (placeholderId), which no namespace sees: the target gives the rows
 * it makes meanwhile numbers above that, never one in the block.
 */
export interface Block {
  first: number;
  base: number;
  hi: number;
}

/** How far the block reaches past the jobs the namespace had: row numbers the source may give out while it moves. */
const BLOCK_GAP = 2 ** 32;

/** The placeholder's id, in the namespace no one has (''): one a namespace, while it moves. */
export const placeholderId = (ns: string) => `move ${ns}`;

/** A job whose frames are copied across units: its id, its row numbers on each shard, and the last seq copied. */
export interface FramesOwed {
  id: string;
  from: number;
  to: number;
  after: number;
  /** Caught up while the namespace works: compared on both shards once its frames are copied. */
  check?: boolean;
}

/** One unit's outcome: rows copied (or deleted), the cursor after them, and a job whose frames are owed before the next. */
export interface Unit {
  rows: number;
  cursor: Cursor;
  done: boolean;
  owed?: FramesOwed;
}

export const done = (rows = 0): Unit => ({ rows, cursor: null, done: true });

/**
 * What copying and deleting a namespace take: its shards as a step reaches them, and the columns
 * read once per instance.
 *
 * The copy runs in two halves. While the namespace goes on working, the jobs it has as the copy
 * begins are copied with their frames and notes (`jobs`, `frames`, `due`), those not written since
 * are compared (`check`), and those written since are caught up in rounds (copy-catch-up.ts). Then,
 * its writes fenced, those written during the last round, and the other tables (`rest`).
 * So the fence lasts as long as the last round's writes take, not as long as the namespace is large.
 */
export class NamespaceCopy {
  readonly ns: string;
  readonly from: Metered;
  readonly to: Metered;
  private readonly columns: Map<string, Columns>;
  /** `columns`: what an earlier step of the same copy read of the tables' columns (kept by the mover). */
  constructor(ns: string, from: Metered, to: Metered, columns = new Map<string, Columns>()) {
    this.ns = ns;
    this.from = from;
    this.to = to;
    this.columns = columns;
  }

  /** The columns of `table` both shards have (read once an instance). */
  async cols(table: string, skip: string[] = []): Promise<Columns> {
    let c = this.columns.get(table);
    if (!c) this.columns.set(table, (c = await columnsOf(this.from, this.to, table, skip)));
    return c;
  }

  /**
   * The target's block for the namespace's row numbers, from the first job the source has (or, with
   * none, the next number it will give) to BLOCK_GAP past its last: reserved by the placeholder
   * at its top, which records where it starts. Run again, it finds the block it made.
   */
  async reserve(): Promise<Block> {
    const span = await this.from.first<{ lo: number | null; hi: number | null; next: number }>(
      `SELECT min(rid) AS lo, max(rid) AS hi, (SELECT ifnull(max(rid), 0) + 1 FROM invocations) AS next FROM invocations WHERE ns = ?1`,
      this.ns,
    );
    const first = span!.lo ?? span!.next;
    const hi = span!.hi ?? first - 1;
    const size = hi - first + 1 + BLOCK_GAP;
    const id = placeholderId(this.ns);
    const there = await this.to.first<{ rid: number; first: number; hi: number }>(
      `SELECT rid, created_at AS first, updated_at AS hi FROM invocations WHERE ns = '' AND id = ?1`,
      id,
    );
    if (there) return { first: there.first, base: there.rid - (there.hi - there.first + 1 + BLOCK_GAP), hi: there.hi };
    // Its number in the same statement as the insert: no row the target makes meanwhile can take one in the block.
    const made = await this.to.first<{ rid: number }>(
      `INSERT INTO invocations (rid, ns, queue, id, envelope, state, created_at, updated_at)
       VALUES ((SELECT ifnull(max(rid), 0) + 1 FROM invocations) + ?2, '', '', ?1, x'', 'cancelled', ?3, ?4) RETURNING rid`,
      id,
      size,
      first,
      hi,
    );
    return { first, base: made!.rid - size, hi };
  }

  /** Deletes the block's placeholder (its move ended, or an earlier try's). Answers true. */
  async dropPlaceholder(): Promise<true> {
    await this.to.all(`DELETE FROM invocations WHERE ns = '' AND id = ?1`, placeholderId(this.ns));
    return true;
  }

  /** Copies the next page of the jobs the namespace had as the copy began (by id), up to `most`. */
  async jobs(block: Block, cursor: Cursor, most: number): Promise<Unit> {
    const inv = await this.cols('invocations', ['rid']);
    const after = cursor ? 'AND id > ?3' : '';
    const page = await this.from.all(
      `SELECT rid, ${selectList(inv, '')} FROM invocations WHERE ns = ?1 AND rid <= ?2 ${after}
        ORDER BY id LIMIT ${Math.min(most, JOBS_PER_PAGE)}`,
      this.ns,
      block.hi,
      ...(cursor ?? []),
    );
    if (!page.length) return done();
    await this.to.batch(
      page.map((r) => insertOf('invocations', inv, r, { rid: this.mapped(block, Number(r.rid)) }, 'INSERT', 'ON CONFLICT DO NOTHING')),
    );
    return { rows: page.length, cursor: [String(page.at(-1)!.id)], done: false };
  }

  /** Copies the next page of their frames (by their job's id, then seq), up to `most`. */
  async frames(block: Block, cursor: Cursor, most: number): Promise<Unit> {
    const fr = await this.cols('frames');
    // The index range starts at the cursor's job: its frames after the cursor's seq, then the next jobs'.
    const after = cursor ? 'AND i.id >= ?3 AND (i.id > ?3 OR f.seq > ?4)' : '';
    const page = await this.from.all(
      `SELECT i.id AS job, ${selectList(fr, 'f.')} FROM invocations i JOIN frames f ON f.inv = i.rid
        WHERE i.ns = ?1 AND i.rid <= ?2 ${after} ORDER BY i.id, f.seq LIMIT ${Math.min(most, FRAMES_PER_PAGE)}`,
      this.ns,
      block.hi,
      ...(cursor ?? []),
    );
    if (!page.length) return done();
    await this.to.batch(
      page.map((r) => insertOf('frames', fr, r, { inv: this.mapped(block, Number(r.inv)) }, 'INSERT', 'ON CONFLICT DO NOTHING')),
    );
    const last = page.at(-1)!;
    return { rows: page.length, cursor: [String(last.job), Number(last.seq)], done: false };
  }

  /** Copies the next page of their notes: finished jobs whose frames wait for their queue's journal retention. */
  async due(block: Block, cursor: Cursor, most: number): Promise<Unit> {
    const c = await this.cols('journals_due');
    const after = cursor ? 'AND i.id > ?3' : '';
    const page = await this.from.all(
      `SELECT i.id AS job, ${selectList(c, 'd.')} FROM invocations i JOIN journals_due d ON d.inv = i.rid
        WHERE i.ns = ?1 AND i.rid <= ?2 ${after} ORDER BY i.id LIMIT ${Math.min(most, ROWS_PER_PAGE)}`,
      this.ns,
      block.hi,
      ...(cursor ?? []),
    );
    if (!page.length) return done();
    await this.to.batch(
      page.map((r) => insertOf('journals_due', c, r, { inv: this.mapped(block, Number(r.inv)) }, 'INSERT', 'ON CONFLICT DO NOTHING')),
    );
    return { rows: page.length, cursor: [String(page.at(-1)!.job)], done: false };
  }

  /** Where the source's job `rid` goes on the target (its number in the block). */
  mapped(b: Block, rid: number): number {
    if (rid < b.first || rid - b.first > b.hi - b.first + BLOCK_GAP)
      throw new LakeshoreError(
        'internal',
        `a job of ${this.ns} took row number ${rid}, outside its move's block from ${b.first}: the source reused a number; move it again`,
      );
    return b.base + (rid - b.first);
  }

  /**
   * Copies the next page of one of the namespace's other tables, by its key, under the fence. The
   * insert triggers made level rows as the jobs came in: the source's counts replace them (the
   * first unit of `queue_levels` deletes them).
   */
  async rest(table: RestTable, cursor: Cursor, most: number): Promise<Unit> {
    const keys = REST_KEYS[table];
    const c = await this.cols(table);
    if (table === 'queue_levels' && !cursor) await this.to.all(`DELETE FROM queue_levels WHERE ns = ?1`, this.ns);
    const after = cursor ? `AND (${keys.join(', ')}) > (${keys.map((_, i) => `?${i + 2}`).join(', ')})` : '';
    const page = await this.from.all(
      `SELECT ${selectList(c, '')} FROM ${table} WHERE ns = ?1 ${after} ORDER BY ${keys.join(', ')} LIMIT ${Math.min(most, ROWS_PER_PAGE)}`,
      this.ns,
      ...(cursor ?? []),
    );
    if (!page.length) return done();
    await this.to.batch(page.map((r) => insertOf(table, c, r, {}, 'INSERT OR REPLACE')));
    const last = page.at(-1)!;
    return { rows: page.length, cursor: keys.map((k) => last[k] as string | number), done: false };
  }
}

/** The namespace's tables besides its jobs, frames and their notes, each with its key within the namespace. */
const REST_KEYS = {
  queue_levels: ['queue', 'priority'],
  queues: ['queue'],
  schedules: ['queue', 'name'],
  workers: ['n'],
} as const;
export type RestTable = keyof typeof REST_KEYS;
export const REST_TABLES = Object.keys(REST_KEYS) as RestTable[];

/**
 * What a unit costs besides a statement a row it copies (at most `most`): its read, the columns'
 * (once an instance) and the levels' delete. Reserving a block costs RESERVE_COST.
 */
export const UNIT_OVERHEAD = 4;
export const RESERVE_COST = 6;
