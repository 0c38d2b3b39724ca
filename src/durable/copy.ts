/**
 * Copying a namespace's rows from one shard to another: the data half of a move (mover.ts runs the
 * protocol around it; shard-rows.ts deletes a copy and checks one), in units of bounded work. A
 * move of a large namespace takes many of the mover's invocations, and Cloudflare bounds what one
 * invocation may ask of D1 (docs/deploy.md, "Moving a namespace"), so each unit says what it will
 * cost before it runs (metered.ts), and each resumes from a cursor the mover keeps between them.
 *
 * Every page is read along an index in its order (jobs by `(ns, id)`, a job's frames by its key),
 * so a unit reads the rows it copies and no others, however large the namespace or the shard. And
 * each unit may run again from the same cursor without harm (a restart between the copy and the
 * mover saving its cursor): a row already there is left as it is.
 *
 * Row numbers (`rid`) are the shard's own. A copied job keeps its distance from the namespace's
 * first one: the target reserves a block above its highest row number as the first job copied (the
 * namespace's last) takes the block's top, so the claim order (by row number within a priority)
 * and every frame's job follow without a map. Columns and values: copy-rows.ts.
 */
import { columnsOf, insertOf, Raw, selectList, type Columns } from './copy-rows.ts';
import type { Meter, Metered, Stmt } from './metered.ts';

/** Rows read per page: a job holds up to 2 MiB (envelope and result), a frame 256 KiB. */
const JOBS_PER_PAGE = 16;
const FRAMES_PER_PAGE = 64;
const ROWS_PER_PAGE = 64;

/** A cursor: where a phase goes on from (the last key it did), or null at its start. */
export type Cursor = (string | number)[] | null;

/**
 * Where the namespace's jobs go on the target. Those it had when the copy began (row numbers up to
 * `hi`) take `base + (rid - first)`: a block whose top the last of them took, above every row the
 * target had. Those made since take the target's next numbers, in their order (newJobs).
 */
export interface Block {
  first: number;
  base: number;
  hi: number;
  /** The job at the block's top: it stays on the target until the copy ends, so no row made meanwhile takes a number in the block. */
  topId: string | null;
}

const topOf = (b: Block) => (b.topId === null ? 0 : b.base + (b.hi - b.first));

/** A job whose frames are copied across units: its id, its row numbers on each shard, and the last seq copied. */
export interface FramesOwed {
  id: string;
  from: number;
  to: number;
  after: number;
}

/** One unit's outcome: rows copied (or deleted), the cursor after them, and a job whose frames are owed before the next. */
export interface Unit {
  rows: number;
  cursor: Cursor;
  done: boolean;
  owed?: FramesOwed;
}

const done = (rows = 0): Unit => ({ rows, cursor: null, done: true });

/** A job as the fenced pass compares it: every column but its blobs (their lengths instead), its frames and its journal note. */
interface Signed {
  rid: number;
  id: string;
  sig: string;
  fr: string;
  due: number | null;
}

/** Jobs compared a unit, under the fence. */
const DIFF_PAGE = 500;
/** What re-copying one job may cost: its row read, its old row, frames and note deleted (by id and by its number), its row and note written. */
export const PATCH_COST = 9;

/**
 * What copying and deleting a namespace take: its shards as a step reaches them, and the columns
 * read once per instance.
 *
 * The copy runs in two halves. While the namespace goes on working, the jobs it has as the copy
 * begins are copied with their frames and notes (`jobs`, `frames`, `due`). Then, its writes fenced,
 * every job is compared on both shards and what changed meanwhile is copied again (`diff`, `prune`),
 * the jobs made meanwhile are copied in their order (`newJobs`), and the other tables (`rest`).
 * So the fence lasts as long as the comparison and what changed, not the whole copy.
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
   * The target's block for the namespace's row numbers, made by copying its last job first: the
   * row at the block's top is above every row the target has, and those it makes later go above it.
   * Run again, it finds the block it made.
   */
  async reserve(): Promise<Block> {
    const span = await this.from.first<{ lo: number | null; hi: number | null }>(
      `SELECT min(rid) AS lo, max(rid) AS hi FROM invocations WHERE ns = ?1`,
      this.ns,
    );
    if (span?.lo == null || span.hi == null) return { first: 0, base: 0, hi: 0, topId: null };
    const inv = await this.cols('invocations', ['rid']);
    const last = await this.from.first(`SELECT rid, ${selectList(inv, '')} FROM invocations WHERE rid = ?1`, span.hi);
    const topId = String(last!.id);
    const there = await this.to.first<{ rid: number }>(`SELECT rid FROM invocations WHERE ns = ?1 AND id = ?2`, this.ns, topId);
    if (there) return { first: span.lo, base: there.rid - (span.hi - span.lo), hi: span.hi, topId };
    // The top's number in the same statement as the insert: no row the target makes meanwhile can take it.
    const top = new Raw(`(SELECT ifnull(max(rid), 0) + 1 FROM invocations) + ${span.hi - span.lo}`);
    const made = await this.to.batch([insertOf('invocations', inv, last!, { rid: top }, 'INSERT', 'RETURNING rid')]);
    const rid = Number((made[0]!.results[0] as { rid: number }).rid);
    return { first: span.lo, base: rid - (span.hi - span.lo), hi: span.hi, topId };
  }

  private mapped(b: Block, rid: number): number {
    return b.base + (rid - b.first);
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

  /** The namespace's jobs on `db` that `where` names, as the fenced pass compares them. */
  private async signed(db: Metered, where: string, ...args: unknown[]): Promise<Signed[]> {
    const inv = await this.cols('invocations', ['rid']);
    // Every column (a blob by its length, -1 when NULL: one NULL would make the whole string NULL).
    const sig = inv.names.map((n) => (inv.blobs.has(n) ? `ifnull(length(i.${n}), -1)` : `quote(i.${n})`)).join(` || ',' || `);
    return db.all<Signed>(
      `SELECT i.rid, i.id, ${sig} AS sig, (SELECT count(*) || ':' || ifnull(max(seq), -1) FROM frames WHERE inv = i.rid) AS fr,
              (SELECT finished_at FROM journals_due WHERE inv = i.rid) AS due
         FROM invocations i WHERE i.ns = ?1 AND ${where}`,
      this.ns,
      ...args,
    );
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
   * Copies the source's job `rid` to the target as it is now, in one batch with the deletion of
   * the target's copy of it (so the block's top is never left empty): at `at` (SQL), with its note.
   * Answers the target's number for it, and its frames if it has any (owed).
   */
  private async recopy(rid: number, at: Raw | number): Promise<{ to: number; owed: FramesOwed | null } | null> {
    const inv = await this.cols('invocations', ['rid']);
    const row = await this.from.first(
      `SELECT rid, ${selectList(inv, '')}, (SELECT finished_at FROM journals_due WHERE inv = ?1) AS due_at,
              (SELECT count(*) FROM frames WHERE inv = ?1) AS nframes FROM invocations WHERE rid = ?1`,
      rid,
    );
    if (!row) return null;
    const id = String(row.id);
    // SQLite gives a row the number after the highest: once the highest rows are deleted, a job
    // made while the copy ran may take a number an old one had, whose copy may still hold its place.
    const slot =
      typeof at === 'number'
        ? [`DELETE FROM frames WHERE inv = ?2`, `DELETE FROM journals_due WHERE inv = ?2`, `DELETE FROM invocations WHERE rid = ?2`]
        : [];
    const made = await this.to.batch([
      ...this.dropped(id),
      ...slot.map((sql) => ({ sql: `${sql} AND EXISTS (SELECT 1 FROM invocations WHERE rid = ?2 AND ns = ?1)`, args: [this.ns, at] })),
      insertOf('invocations', inv, row, { rid: at }, 'INSERT', 'RETURNING rid'),
      ...(row.due_at == null
        ? []
        : [
            {
              sql: `INSERT INTO journals_due (inv, ns, queue, finished_at) SELECT rid, ns, queue, ?3 FROM invocations WHERE ns = ?1 AND id = ?2`,
              args: [this.ns, id, row.due_at],
            },
          ]),
    ]);
    const to = Number((made[3 + slot.length]!.results[0] as { rid: number }).rid);
    return { to, owed: Number(row.nframes) ? { id, from: rid, to, after: -1 } : null };
  }

  /**
   * Under the fence: the next page of the source's jobs (by id) compared with the target's, each
   * that differs (its row, its note or its frames) copied again; one made since the copy began is
   * left to newJobs, its old copy deleted. Stops at a job whose frames are owed, or when the meter
   * would not cover the next job.
   */
  async diff(block: Block, cursor: Cursor, meter: Meter): Promise<Unit> {
    const after = cursor ? String(cursor[0]) : '';
    const src = await this.signed(this.from, `i.id > ?2 ORDER BY i.id LIMIT ${DIFF_PAGE}`, after);
    if (!src.length) return done();
    const there = await this.signed(this.to, `i.id IN (SELECT value FROM json_each(?2))`, JSON.stringify(src.map((s) => s.id)));
    const dst = new Map(there.map((t) => [t.id, t]));
    let rows = 0;
    let at = after;
    for (const s of src) {
      if (meter.left < PATCH_COST) break;
      const t = dst.get(s.id);
      if (s.rid > block.hi) {
        // Made since the copy began (its id maybe reused): newJobs copies it in its order.
        if (t && s.id !== block.topId) {
          await this.to.batch(this.dropped(s.id));
          rows++;
        }
      } else if (!t || t.sig !== s.sig || t.due !== s.due) {
        const r = await this.recopy(s.rid, this.mapped(block, s.rid));
        rows++;
        if (r?.owed) return { rows, cursor: [s.id], done: false, owed: r.owed };
      } else if (t.fr !== s.fr) {
        await this.to.all(`DELETE FROM frames WHERE inv = ?1`, t.rid);
        rows++;
        return { rows, cursor: [s.id], done: false, owed: { id: s.id, from: s.rid, to: t.rid, after: -1 } };
      }
      at = s.id;
    }
    return { rows, cursor: [at], done: false };
  }

  /** Under the fence: the next page of the target's jobs (by id), those the source no longer has deleted (but the block's top: newJobs). */
  async prune(block: Block, cursor: Cursor, meter: Meter): Promise<Unit> {
    const most = Math.min(1_000, Math.floor((meter.left - 2) / 3));
    if (most < 1) return { rows: 0, cursor, done: false };
    const after = cursor ? String(cursor[0]) : '';
    const ids = (
      await this.to.all<{ id: string }>(`SELECT id FROM invocations WHERE ns = ?1 AND id > ?2 ORDER BY id LIMIT ${most}`, this.ns, after)
    ).map((r) => r.id);
    if (!ids.length) return done();
    const kept = new Set(
      (
        await this.from.all<{ id: string }>(
          `SELECT id FROM invocations WHERE ns = ?1 AND id IN (SELECT value FROM json_each(?2))`,
          this.ns,
          JSON.stringify(ids),
        )
      ).map((r) => r.id),
    );
    const gone = ids.filter((id) => !kept.has(id) && id !== block.topId);
    if (gone.length) await this.to.batch(gone.flatMap((id) => this.dropped(id)));
    return { rows: gone.length, cursor: [ids.at(-1)!], done: false };
  }

  /**
   * Under the fence: the next jobs made since the copy began, in their order (by row number), each
   * at the target's next number above the block. Last, the block's top, if the source no longer
   * has it.
   */
  async newJobs(block: Block, cursor: Cursor, meter: Meter): Promise<Unit> {
    const after = cursor ? Number(cursor[0]) : block.hi;
    // By row number, not by the namespace's index: the source's rows made since (a bounded range).
    const next = await this.from.all<{ rid: number }>(
      `SELECT rid FROM invocations WHERE rid > ?2 AND +ns = ?1 ORDER BY rid LIMIT ${DIFF_PAGE}`,
      this.ns,
      after,
    );
    let rows = 0;
    let at = after;
    for (const { rid } of next) {
      if (meter.left < PATCH_COST) return { rows, cursor: [at], done: false };
      const r = await this.recopy(rid, new Raw(`(SELECT max(ifnull(max(rid), 0) + 1, ${topOf(block) + 1}) FROM invocations)`));
      rows++;
      at = rid;
      if (r?.owed) return { rows, cursor: [at], done: false, owed: r.owed };
    }
    if (next.length) return { rows, cursor: [at], done: false };
    if (block.topId !== null && meter.left >= 4) {
      const kept = await this.from.first(`SELECT 1 AS x FROM invocations WHERE ns = ?1 AND id = ?2`, this.ns, block.topId);
      const there = await this.to.first<{ rid: number }>(`SELECT rid FROM invocations WHERE ns = ?1 AND id = ?2`, this.ns, block.topId);
      // Gone from the source, or made again since (a new number): the block's old top goes.
      if (!kept && there?.rid === topOf(block)) await this.to.batch(this.dropped(block.topId));
      return done(rows);
    }
    return block.topId === null ? done(rows) : { rows, cursor: [at], done: false };
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
    return page.length < n ? null : { ...owed, after: Number(page.at(-1)!.seq) };
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
