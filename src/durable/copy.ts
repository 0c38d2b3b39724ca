/**
 * Copying a namespace's rows from one shard to another: the data half of a move (mover.ts runs the
 * protocol around it; shard-rows.ts deletes a copy, copy-check.ts compares one), in units of
 * bounded work. A move of a large namespace takes many of the mover's invocations, and Cloudflare
 * bounds what one invocation may ask of D1 (docs/deploy.md, "Moving a namespace"), so each unit
 * says what it will cost before it runs (metered.ts), and each resumes from a cursor the mover
 * keeps between them.
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
import type { Meter, Metered, Stmt } from './metered.ts';
import { changedIds, cleanStmt, NOTES_PAGE } from './move-track.ts';
import { COMPARE_COST, compareJobs } from './copy-check.ts';
import { LakeshoreError } from '../core/errors.ts';

/** Rows read per page: a job holds up to 2 MiB (envelope and result), a frame 256 KiB. */
const JOBS_PER_PAGE = 16;
const FRAMES_PER_PAGE = 64;
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

const done = (rows = 0): Unit => ({ rows, cursor: null, done: true });

/** Most bytes of jobs and frames a unit of catching up reads and writes (a job holds up to 2 MiB: one such goes alone). */
const PAGE_BYTES = 4 << 20;
/** Most frames a unit of catching up copies with their jobs (a job with more has them copied after it, owed). */
const INLINE_FRAMES = 64;

/** What a unit of catching up needs before its first job: two reads, and (live) those `catchUp` still makes. */
export const CATCH_UP_COST = { live: 6 + COMPARE_COST, fenced: 5 };

/** A job of the source as a catch-up pages them: its id, its bytes and how many frames it has. */
interface Sized {
  id: string;
  /** Its row's bytes and its frames'. */
  size: number;
  /** How many frames it has. */
  framed: number;
}
/**
 * What copying a job again may cost, in statements: its old copy, frames and note deleted (by id,
 * and by the number of its slot), its row and its note written.
 */
export const PATCH_COST = 8;

/**
 * What copying and deleting a namespace take: its shards as a step reaches them, and the columns
 * read once per instance.
 *
 * The copy runs in two halves. While the namespace goes on working, the jobs it has as the copy
 * begins are copied with their frames and notes (`jobs`, `frames`, `due`), those not written since
 * are compared (`check`), and those written since are caught up in rounds (`catchUp`, live). Then,
 * its writes fenced, those written during the last round (`catchUp`) and the other tables (`rest`).
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

  private async cols(table: string, skip: string[] = []): Promise<Columns> {
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

  /** Deletes the target's job `id`, its frames and its note. */
  private dropped(id: string): Stmt[] {
    const rid = `(SELECT rid FROM invocations WHERE ns = ?1 AND id = ?2)`;
    return [
      { sql: `DELETE FROM frames WHERE inv = ${rid}`, args: [this.ns, id] },
      { sql: `DELETE FROM journals_due WHERE inv = ${rid}`, args: [this.ns, id] },
      { sql: `DELETE FROM invocations WHERE ns = ?1 AND id = ?2`, args: [this.ns, id] },
    ];
  }

  /**
   * The first of `candidates` one page takes, each with its frames: within what the meter has left
   * (PATCH_COST and a statement a frame each, besides `reads`), within PAGE_BYTES and INLINE_FRAMES.
   * A job whose frames would pass them ends the page: first in it, its frames are owed (copied
   * in units of their own after it), else it waits for the next page.
   */
  private page(candidates: Sized[], meter: Meter, reads: number): { take: Sized[]; owed: Sized | null } {
    const take: Sized[] = [];
    let left = meter.left - reads;
    let bytes = 0;
    let frames = 0;
    for (const c of candidates) {
      const fits = frames + c.framed <= INLINE_FRAMES && bytes + c.size <= PAGE_BYTES;
      if (!fits && !take.length) return { take, owed: left >= PATCH_COST ? c : null };
      if (!fits || left < PATCH_COST + c.framed) break;
      take.push(c);
      left -= PATCH_COST + c.framed;
      bytes += c.size;
      frames += c.framed;
    }
    return { take, owed: null };
  }

  /** Where the source's job `rid` goes on the target (its number in the block). */
  private mapped(b: Block, rid: number): number {
    if (rid < b.first || rid - b.first > b.hi - b.first + BLOCK_GAP)
      throw new LakeshoreError(
        'internal',
        `a job of ${this.ns} took row number ${rid}, outside its move's block from ${b.first}: the source reused a number; move it again`,
      );
    return b.base + (rid - b.first);
  }

  /**
   * One unit of catching up (`live`: while the namespace works; else under the fence): the next
   * page of the jobs noted dirty (move-track.ts), by id, each copied again as the source has it
   * now, with its frames, or its copy deleted if the source no longer has it. Each job's old copy is
   * deleted and its new one written in one D1 transaction, a page in a few batches. A page ends
   * where the meter, PAGE_BYTES or INLINE_FRAMES would not cover the next job; one whose frames
   * alone pass them goes alone, its frames owed (copied in units of their own before the next).
   *
   * While the namespace works, the page's notes are marked clean before their jobs are read, and
   * once copied the page is compared on both shards but for the jobs written since (dirty again:
   * the next round or the fence takes them). So every job caught up live is compared as it was
   * copied, and the fence catches up and compares only what was written in the last round. A round
   * ends at `until`, the last id dirty as it began: ids noted during it may sort anywhere, and a
   * round that followed them might never end.
   */
  async catchUp(block: Block, cursor: Cursor, meter: Meter, live: boolean, until: string | null = null): Promise<Unit> {
    const after = cursor ? String(cursor[0]) : '';
    // Still to read: the page (both shards) and its frames, and while it works its clean mark and the comparison.
    const reads = live ? 4 + COMPARE_COST : 3;
    // As many notes as the meter may cover jobs (a note read is a row read: not more than the page takes).
    const most = Math.min(NOTES_PAGE, Math.max(1, Math.floor((meter.left - 2 - reads) / PATCH_COST)));
    const ids = await changedIds(this.from, this.ns, after, most, until);
    if (!ids.length) return done();
    const sized = new Map(
      (
        await this.from.all<Sized>(
          `SELECT id, length(envelope) + ifnull(length(result), 0) + ifnull(length(error), 0)
                    + ifnull((SELECT total(length(body)) FROM frames WHERE inv = invocations.rid), 0) AS size,
                  (SELECT count(*) FROM frames WHERE inv = invocations.rid) AS framed
             FROM invocations WHERE ns = ?1 AND id IN (SELECT value FROM json_each(?2))`,
          this.ns,
          JSON.stringify(ids),
        )
      ).map((r) => [r.id, r]),
    );
    const chosen = this.page(
      ids.map((id) => sized.get(id) ?? { id, size: 0, framed: 0 }),
      meter,
      reads,
    );
    const page = [...chosen.take, ...(chosen.owed ? [chosen.owed] : [])].map((c) => c.id);
    if (!page.length) return { rows: 0, cursor, done: false };
    const owedId = chosen.owed?.id ?? null;
    const list = JSON.stringify(page);
    // Clean before the read: a write from here on marks its job dirty again.
    if (live) await this.from.batch([cleanStmt(this.ns, page)]);
    const [inv, fr] = [await this.cols('invocations', ['rid']), await this.cols('frames')];
    const [rows, there] = await Promise.all([
      this.from.all(
        `SELECT rid, ${selectList(inv, '')}, (SELECT finished_at FROM journals_due WHERE inv = invocations.rid) AS due_at
           FROM invocations WHERE ns = ?1 AND id IN (SELECT value FROM json_each(?2))`,
        this.ns,
        list,
      ),
      this.to.all<{ id: string }>(`SELECT id FROM invocations WHERE ns = ?1 AND id IN (SELECT value FROM json_each(?2))`, this.ns, list),
    ]);
    // The frames of every job the page copies whole (frames written since the first read included).
    const whole = rows.filter((r) => String(r.id) !== owedId).map((r) => Number(r.rid));
    const framesOf = new Map<number, Record<string, unknown>[]>();
    if (whole.length)
      for (const f of await this.from.all(
        `SELECT ${selectList(fr, '')} FROM frames WHERE inv IN (SELECT value FROM json_each(?1)) ORDER BY inv, seq`,
        JSON.stringify(whole),
      ))
        framesOf.set(Number(f.inv), [...(framesOf.get(Number(f.inv)) ?? []), f]);
    const byId = new Map(rows.map((r) => [String(r.id), r]));
    const kept = new Set(there.map((r) => r.id));
    const groups: Stmt[][] = [];
    let owed: FramesOwed | null = null;
    let n = 0;
    for (const id of page) {
      const row = byId.get(id);
      if (!row) {
        // Deleted since the copy (or made and deleted): its copy goes.
        if (kept.has(id)) {
          groups.push(this.dropped(id));
          n++;
        }
        continue;
      }
      const rid = Number(row.rid);
      const at = this.mapped(block, rid);
      // SQLite gives a row the number after the highest: once the highest rows are deleted, a job
      // made while the copy ran may take a number an old one had, whose copy may still hold its place.
      const slot = [
        `DELETE FROM frames WHERE inv = ?2`,
        `DELETE FROM journals_due WHERE inv = ?2`,
        `DELETE FROM invocations WHERE rid = ?2`,
      ];
      groups.push([
        ...this.dropped(id),
        ...slot.map((sql) => ({ sql: `${sql} AND EXISTS (SELECT 1 FROM invocations WHERE rid = ?2 AND ns = ?1)`, args: [this.ns, at] })),
        insertOf('invocations', inv, row, { rid: at }, 'INSERT'),
        ...(row.due_at == null
          ? []
          : [
              {
                sql: `INSERT INTO journals_due (inv, ns, queue, finished_at) VALUES (?1, ?2, ?3, ?4)`,
                args: [at, this.ns, row.queue, row.due_at],
              },
            ]),
        ...(framesOf.get(rid) ?? []).map((f) => insertOf('frames', fr, f, { inv: at }, 'INSERT')),
      ]);
      if (id === owedId) owed = { id, from: rid, to: at, after: -1, ...(live ? { check: true } : {}) };
      n++;
    }
    await this.to.groups(groups);
    if (live) await compareJobs(this, page, owed?.id ?? null);
    return { rows: n, cursor: [page.at(-1)!], done: false, ...(owed ? { owed } : {}) };
  }

  /** Copies the next of a job's frames owed (after `owed.after`), up to `most`. */
  async owedFrames(owed: FramesOwed, most: number): Promise<FramesOwed | null> {
    const fr = await this.cols('frames');
    const n = Math.min(most, FRAMES_PER_PAGE);
    const page = await this.from.all(
      `SELECT ${selectList(fr, '')} FROM frames WHERE inv = ?1 AND seq > ?2 ORDER BY seq LIMIT ${n}`,
      owed.from,
      owed.after,
    );
    if (page.length) await this.to.batch(page.map((r) => insertOf('frames', fr, r, { inv: owed.to }, 'INSERT', 'ON CONFLICT DO NOTHING')));
    if (page.length === n) return { ...owed, after: Number(page.at(-1)!.seq) };
    if (owed.check) await compareJobs(this, [owed.id], null);
    return null;
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
