/**
 * Catching up a namespace's copy (copy.ts) on the jobs written since it read them: the jobs noted
 * dirty (move-track.ts) copied again as the source has them now, with their frames, or their copy
 * deleted. A move does it in rounds while the namespace works, and once more under its fence
 * (mover.ts).
 */
import { type Block, type Cursor, done, FRAMES_PER_PAGE, type FramesOwed, type NamespaceCopy, type Unit } from './copy.ts';
import { COMPARE_COST, compareJobs } from './copy-check.ts';
import { insertOf, selectList } from './copy-rows.ts';
import type { Meter, Stmt } from './metered.ts';
import { changedIds, cleanStmt, NOTES_PAGE } from './move-track.ts';

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

/** Deletes the target's job `id` of `ns`, its frames and its note. */
function dropped(ns: string, id: string): Stmt[] {
  const rid = `(SELECT rid FROM invocations WHERE ns = ?1 AND id = ?2)`;
  return [
    { sql: `DELETE FROM frames WHERE inv = ${rid}`, args: [ns, id] },
    { sql: `DELETE FROM journals_due WHERE inv = ${rid}`, args: [ns, id] },
    { sql: `DELETE FROM invocations WHERE ns = ?1 AND id = ?2`, args: [ns, id] },
  ];
}

/**
 * The first of `candidates` one page takes, each with its frames: within what the meter has left
 * (PATCH_COST and a statement a frame each, besides `reads`), within PAGE_BYTES and INLINE_FRAMES.
 * A job whose frames would pass them ends the page: first in it, its frames are owed (copied
 * in units of their own after it), else it waits for the next page.
 */
function pageOf(candidates: Sized[], meter: Meter, reads: number): { take: Sized[]; owed: Sized | null } {
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
export async function catchUp(
  copy: NamespaceCopy,
  block: Block,
  cursor: Cursor,
  meter: Meter,
  live: boolean,
  until: string | null = null,
): Promise<Unit> {
  const { ns, from, to } = copy;
  const after = cursor ? String(cursor[0]) : '';
  // Still to read: the page (both shards) and its frames, and while it works its clean mark and the comparison.
  const reads = live ? 4 + COMPARE_COST : 3;
  // As many notes as the meter may cover jobs (a note read is a row read: not more than the page takes).
  const most = Math.min(NOTES_PAGE, Math.max(1, Math.floor((meter.left - 2 - reads) / PATCH_COST)));
  const ids = await changedIds(from, ns, after, most, until);
  if (!ids.length) return done();
  const sized = new Map(
    (
      await from.all<Sized>(
        `SELECT id, length(envelope) + ifnull(length(result), 0) + ifnull(length(error), 0)
                  + ifnull((SELECT total(length(body)) FROM frames WHERE inv = invocations.rid), 0) AS size,
                (SELECT count(*) FROM frames WHERE inv = invocations.rid) AS framed
           FROM invocations WHERE ns = ?1 AND id IN (SELECT value FROM json_each(?2))`,
        ns,
        JSON.stringify(ids),
      )
    ).map((r) => [r.id, r]),
  );
  const chosen = pageOf(
    ids.map((id) => sized.get(id) ?? { id, size: 0, framed: 0 }),
    meter,
    reads,
  );
  const page = [...chosen.take, ...(chosen.owed ? [chosen.owed] : [])].map((c) => c.id);
  if (!page.length) return { rows: 0, cursor, done: false };
  const owedId = chosen.owed?.id ?? null;
  const list = JSON.stringify(page);
  // Clean before the read: a write from here on marks its job dirty again.
  if (live) await from.batch([cleanStmt(ns, page)]);
  const [inv, fr] = [await copy.cols('invocations', ['rid']), await copy.cols('frames')];
  const [rows, there] = await Promise.all([
    from.all(
      `SELECT rid, ${selectList(inv, '')}, (SELECT finished_at FROM journals_due WHERE inv = invocations.rid) AS due_at
         FROM invocations WHERE ns = ?1 AND id IN (SELECT value FROM json_each(?2))`,
      ns,
      list,
    ),
    to.all<{ id: string }>(`SELECT id FROM invocations WHERE ns = ?1 AND id IN (SELECT value FROM json_each(?2))`, ns, list),
  ]);
  // The frames of every job the page copies whole (frames written since the first read included).
  const whole = rows.filter((r) => String(r.id) !== owedId).map((r) => Number(r.rid));
  const framesOf = new Map<number, Record<string, unknown>[]>();
  if (whole.length)
    for (const f of await from.all(
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
        groups.push(dropped(ns, id));
        n++;
      }
      continue;
    }
    const rid = Number(row.rid);
    const at = copy.mapped(block, rid);
    // SQLite gives a row the number after the highest: once the highest rows are deleted, a job
    // made while the copy ran may take a number an old one had, whose copy may still hold its place.
    const slot = [`DELETE FROM frames WHERE inv = ?2`, `DELETE FROM journals_due WHERE inv = ?2`, `DELETE FROM invocations WHERE rid = ?2`];
    groups.push([
      ...dropped(ns, id),
      ...slot.map((sql) => ({ sql: `${sql} AND EXISTS (SELECT 1 FROM invocations WHERE rid = ?2 AND ns = ?1)`, args: [ns, at] })),
      insertOf('invocations', inv, row, { rid: at }, 'INSERT'),
      ...(row.due_at == null
        ? []
        : [
            {
              sql: `INSERT INTO journals_due (inv, ns, queue, finished_at) VALUES (?1, ?2, ?3, ?4)`,
              args: [at, ns, row.queue, row.due_at],
            },
          ]),
      ...(framesOf.get(rid) ?? []).map((f) => insertOf('frames', fr, f, { inv: at }, 'INSERT')),
    ]);
    if (id === owedId) owed = { id, from: rid, to: at, after: -1, ...(live ? { check: true } : {}) };
    n++;
  }
  await to.groups(groups);
  if (live) await compareJobs(copy, page, owed?.id ?? null);
  return { rows: n, cursor: [page.at(-1)!], done: false, ...(owed ? { owed } : {}) };
}

/** Copies the next of a job's frames owed (after `owed.after`), up to `most`. */
export async function owedFrames(copy: NamespaceCopy, owed: FramesOwed, most: number): Promise<FramesOwed | null> {
  const { from, to } = copy;
  const fr = await copy.cols('frames');
  const n = Math.min(most, FRAMES_PER_PAGE);
  const page = await from.all(
    `SELECT ${selectList(fr, '')} FROM frames WHERE inv = ?1 AND seq > ?2 ORDER BY seq LIMIT ${n}`,
    owed.from,
    owed.after,
  );
  if (page.length) await to.batch(page.map((r) => insertOf('frames', fr, r, { inv: owed.to }, 'INSERT', 'ON CONFLICT DO NOTHING')));
  if (page.length === n) return { ...owed, after: Number(page.at(-1)!.seq) };
  if (owed.check) await compareJobs(copy, [owed.id], null);
  return null;
}
