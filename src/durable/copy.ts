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
import { CHANGES, changedIds } from './move-track.ts';
import { printOf, printStmts, PRINT_COST, restPrint } from './shard-rows.ts';
import { LakeshoreError } from '../core/errors.ts';

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

/** Jobs looked at a unit, under the fence: those noted as changed, or made since the copy began. */
const FENCED_PAGE = 500;
/** Most bytes of jobs a fenced unit reads and writes (a job holds up to 2 MiB: one such goes alone). */
const PAGE_BYTES = 4 << 20;

/** Jobs a unit of the check while the namespace works compares (each statement reads at most these, and their frames). */
const CHECK_PAGE = 2_000;
/** The verify's cursor once the jobs are done, for the other tables: a number, which no job's id is. */
const REST = 0;
/** What a unit of the check costs (its page's end, the notes and two prints), and of the verify. */
export const CHECK_COST = 2 + 2 * PRINT_COST;
export const VERIFY_COST = 1 + 2 * PRINT_COST;

const mismatch = (ns: string, what: string, a: string, b: string) =>
  new LakeshoreError('internal', `the copy of ${ns} does not match its source in ${what}: ${a.slice(0, 400)} vs ${b.slice(0, 400)}`);

/** A job of the source as the fenced pass pages them: its number, id, bytes, and whether it has frames (1 or 0). */
interface Sized {
  rid: number;
  id: string;
  size: number;
  framed: number;
}
/**
 * What copying a job again may cost, in statements: its old copy, frames and note deleted (by id,
 * and by the number of its slot), its row and its note written. One made since the copy began has
 * no slot: NEW_COST.
 */
export const PATCH_COST = 8;
const NEW_COST = 5;

/**
 * What copying and deleting a namespace take: its shards as a step reaches them, and the columns
 * read once per instance.
 *
 * The copy runs in two halves. While the namespace goes on working, the jobs it has as the copy
 * begins are copied with their frames and notes (`jobs`, `frames`, `due`). Then, its writes fenced,
 * the jobs the source shard noted as changed meanwhile (move-track.ts) are copied again or deleted
 * (`changed`), the jobs made meanwhile are copied in their order (`newJobs`), and the other tables
 * (`rest`). So the fence lasts as long as what changed takes, not as long as the namespace is large.
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
   * What the source holds of the jobs `where` names (its first argument the namespace): each one's
   * number, its size, and whether it has frames.
   */
  private sized(where: string, ...args: unknown[]): Promise<Sized[]> {
    return this.from.all<Sized>(
      `SELECT rid, id, length(envelope) + ifnull(length(result), 0) + ifnull(length(error), 0) AS size,
              EXISTS (SELECT 1 FROM frames WHERE inv = invocations.rid) AS framed
         FROM invocations WHERE ${where}`,
      this.ns,
      ...args,
    );
  }

  /**
   * Copies these jobs again as the source has them now, each in one D1 transaction with the
   * deletion of the target's copy of it (so the block's top is never left empty), with its note,
   * and deletes the copies of `drops`. A job goes at its slot in the block (`at`), or at the
   * target's next number above the block (`at` null: in the order given). Answers the frames owed
   * of the last job, if it has any (a page ends at the first job with frames). What it costs:
   * one read, and at most PATCH_COST a job.
   */
  private async patch(jobs: { rid: number; at: number | null }[], drops: string[], block: Block): Promise<FramesOwed | null> {
    const inv = await this.cols('invocations', ['rid']);
    const rows = await this.from.all(
      `SELECT rid, ${selectList(inv, '')}, (SELECT finished_at FROM journals_due WHERE inv = invocations.rid) AS due_at,
              EXISTS (SELECT 1 FROM frames WHERE inv = invocations.rid) AS framed
         FROM invocations WHERE rid IN (SELECT value FROM json_each(?1))`,
      JSON.stringify(jobs.map((j) => j.rid)),
    );
    const byRid = new Map(rows.map((r) => [Number(r.rid), r]));
    const next = new Raw(`(SELECT max(ifnull(max(rid), 0) + 1, ${topOf(block) + 1}) FROM invocations)`);
    const groups = drops.map((id) => this.dropped(id));
    let statements = groups.length * 3;
    let owed: { id: string; from: number; insert: number } | null = null;
    for (const { rid, at } of jobs) {
      const row = byRid.get(rid);
      if (!row) continue;
      const id = String(row.id);
      // SQLite gives a row the number after the highest: once the highest rows are deleted, a job
      // made while the copy ran may take a number an old one had, whose copy may still hold its place.
      const slot =
        at === null
          ? []
          : [`DELETE FROM frames WHERE inv = ?2`, `DELETE FROM journals_due WHERE inv = ?2`, `DELETE FROM invocations WHERE rid = ?2`];
      const group = [
        ...this.dropped(id),
        ...slot.map((sql) => ({ sql: `${sql} AND EXISTS (SELECT 1 FROM invocations WHERE rid = ?2 AND ns = ?1)`, args: [this.ns, at] })),
        insertOf('invocations', inv, row, { rid: at ?? next }, 'INSERT', 'RETURNING rid'),
        ...(row.due_at == null
          ? []
          : [
              {
                sql: `INSERT INTO journals_due (inv, ns, queue, finished_at) SELECT rid, ns, queue, ?3 FROM invocations WHERE ns = ?1 AND id = ?2`,
                args: [this.ns, id, row.due_at],
              },
            ]),
      ];
      if (row.framed) owed = { id, from: rid, insert: statements + 3 + slot.length };
      statements += group.length;
      groups.push(group);
    }
    const made = await this.to.groups(groups);
    if (!owed) return null;
    const to = Number((made[owed.insert]!.results[0] as { rid: number }).rid);
    return { id: owed.id, from: owed.from, to, after: -1 };
  }

  /**
   * The first of `candidates` one page takes: within what the meter has left (`cost` each, besides
   * `reads`), within PAGE_BYTES of rows read, and ending at the first job with frames (they are owed).
   */
  private page<T extends { size: number; framed: number }>(candidates: T[], meter: Meter, reads: number, cost: (c: T) => number): T[] {
    const out: T[] = [];
    let left = meter.left - reads;
    let bytes = 0;
    for (const c of candidates) {
      if (left < cost(c) || (out.length && bytes + c.size > PAGE_BYTES)) break;
      out.push(c);
      left -= cost(c);
      bytes += c.size;
      if (c.framed) break;
    }
    return out;
  }

  /**
   * Under the fence: the next page of the jobs noted as changed since the copy began (move-track.ts),
   * by id, each copied again as it is now; one the source no longer has, or made since the copy
   * began (newJobs copies those in their order), has its copy deleted, but the block's top (newJobs
   * again). A page ends at a job whose frames are owed, or where the meter would not cover the next.
   */
  async changed(block: Block, cursor: Cursor, meter: Meter): Promise<Unit> {
    const after = cursor ? String(cursor[0]) : '';
    const ids = await changedIds(this.from, this.ns, after, FENCED_PAGE);
    if (!ids.length) return done();
    const list = JSON.stringify(ids);
    const [src, dst] = await Promise.all([
      this.sized(`ns = ?1 AND id IN (SELECT value FROM json_each(?2))`, list),
      this.to.all<{ id: string }>(`SELECT id FROM invocations WHERE ns = ?1 AND id IN (SELECT value FROM json_each(?2))`, this.ns, list),
    ]);
    const of = new Map(src.map((r) => [r.id, r]));
    const there = new Set(dst.map((r) => r.id));
    // Each id: copied again (a job the copy began with), its copy deleted (gone, or made since), or nothing.
    const todo = ids.map((id) => {
      const s = of.get(id);
      const copy = s !== undefined && s.rid <= block.hi;
      const drop = !copy && there.has(id) && id !== block.topId;
      return { id, rid: s?.rid ?? 0, copy, drop, size: copy ? s!.size : 0, framed: copy ? s!.framed : 0 };
    });
    const page = this.page(todo, meter, 1, (t) => (t.copy ? PATCH_COST : t.drop ? 3 : 0));
    if (!page.length) return { rows: 0, cursor, done: false };
    const owed = await this.patch(
      page.filter((t) => t.copy).map((t) => ({ rid: t.rid, at: this.mapped(block, t.rid) })),
      page.filter((t) => t.drop).map((t) => t.id),
      block,
    );
    const rows = page.filter((t) => t.copy || t.drop).length;
    return { rows, cursor: [page.at(-1)!.id], done: false, ...(owed ? { owed } : {}) };
  }

  /**
   * Under the fence: the next jobs made since the copy began, in their order (by row number), each
   * at the target's next number above the block. Last, the block's top, if the source no longer
   * has it.
   */
  async newJobs(block: Block, cursor: Cursor, meter: Meter): Promise<Unit> {
    const after = cursor ? Number(cursor[0]) : block.hi;
    // By row number, not by the namespace's index: the source's rows made since (a bounded range).
    const next = await this.sized(`rid > ?2 AND +ns = ?1 ORDER BY rid LIMIT ${FENCED_PAGE}`, after);
    if (next.length) {
      const page = this.page(next, meter, 1, () => NEW_COST);
      if (!page.length) return { rows: 0, cursor, done: false };
      const owed = await this.patch(
        page.map((j) => ({ rid: j.rid, at: null })),
        [],
        block,
      );
      return { rows: page.length, cursor: [page.at(-1)!.rid], done: false, ...(owed ? { owed } : {}) };
    }
    if (block.topId !== null && meter.left >= 4) {
      const kept = await this.from.first(`SELECT 1 AS x FROM invocations WHERE ns = ?1 AND id = ?2`, this.ns, block.topId);
      const there = await this.to.first<{ rid: number }>(`SELECT rid FROM invocations WHERE ns = ?1 AND id = ?2`, this.ns, block.topId);
      // Gone from the source, or made again since (a new number): the block's old top goes.
      if (!kept && there?.rid === topOf(block)) await this.to.batch(this.dropped(block.topId));
      return done();
    }
    return block.topId === null ? done() : { rows: 0, cursor, done: false };
  }

  /**
   * While the namespace works, after the copy: the next page of its jobs (by id) checked on both
   * shards, but those noted as changed (the fence copies and checks them again). A job not noted
   * was not written since the noting began, before the copy read it, so its copy must be as it is:
   * a difference is a copy gone wrong (or a row on the target the source never had), and the move
   * is undone.
   */
  async check(cursor: Cursor): Promise<Unit> {
    const after = cursor ? String(cursor[0]) : '';
    const end =
      (
        await this.from.first<{ id: string }>(
          `SELECT id FROM invocations WHERE ns = ?1 AND id > ?2 ORDER BY id LIMIT 1 OFFSET ${CHECK_PAGE - 1}`,
          this.ns,
          after,
        )
      )?.id ?? null;
    const range = end === null ? `i.id > ?2` : `i.id > ?2 AND i.id <= ?3`;
    const args = end === null ? [this.ns, after] : [this.ns, after, end];
    // The notes and the print of the rest in one batch: one transaction, so they agree.
    const [noted, ...src] = await this.from.batch([
      { sql: `SELECT id FROM ${CHANGES} i WHERE ns = ?1 AND ${range}`, args },
      ...printStmts(`i.ns = ?1 AND ${range} AND i.id NOT IN (SELECT id FROM ${CHANGES} WHERE ns = ?1)`, args),
    ]);
    const ids = JSON.stringify((noted!.results as { id: string }[]).map((r) => r.id));
    const dst = await this.to.batch(
      printStmts(`i.ns = ?1 AND ${range} AND i.id NOT IN (SELECT value FROM json_each(?${args.length + 1}))`, [...args, ids]),
    );
    const [a, b] = [printOf(src), printOf(dst)];
    if (a.print !== b.print) throw mismatch(this.ns, `jobs after ${JSON.stringify(after)}`, a.print, b.print);
    return { rows: a.jobs, cursor: end === null ? null : [end], done: end === null };
  }

  /**
   * Under the fence, once every change is caught up: the next page of the jobs noted as changed
   * checked on both shards (those the source no longer has, on neither), then the namespace's other
   * tables. With the check of the rest while it worked, every job was checked once as it is.
   */
  async verify(cursor: Cursor): Promise<Unit> {
    if (cursor?.[0] === REST) {
      const [a, b] = await Promise.all([restPrint(this.from, this.ns), restPrint(this.to, this.ns)]);
      if (a !== b) throw mismatch(this.ns, 'settings, schedules, workers or levels', a, b);
      return done();
    }
    const after = cursor ? String(cursor[0]) : '';
    const ids = await changedIds(this.from, this.ns, after, FENCED_PAGE);
    if (!ids.length) return { rows: 0, cursor: [REST], done: false };
    const which = `i.ns = ?1 AND i.id IN (SELECT value FROM json_each(?2))`;
    const args = [this.ns, JSON.stringify(ids)];
    const [src, dst] = await Promise.all([this.from.batch(printStmts(which, args)), this.to.batch(printStmts(which, args))]);
    const [a, b] = [printOf(src), printOf(dst)];
    if (a.print !== b.print) throw mismatch(this.ns, `the jobs that changed after ${JSON.stringify(after)}`, a.print, b.print);
    return { rows: a.jobs, cursor: [ids.at(-1)!], done: false };
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
