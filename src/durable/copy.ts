/**
 * Copying a namespace's rows from one shard to another, checking the copy, and deleting a copy:
 * the data half of a move (mover.ts runs the protocol around it). The columns are read from the
 * databases themselves (`pragma_table_info`), those both have, so a new column is copied without a
 * change here (and drizzle stays out of the Worker's bundle).
 *
 * Row numbers (`rid`) are the shard's own: a copied job gets the target's next ones, in the source's
 * order (claim order and the journal's key depend on that order, not on the numbers), and its frames
 * follow it to its new number. An envelope or result stored as text stays text, a blob a blob.
 */

/** Rows read per page: a job holds up to 2 MiB (envelope and result), a frame 256 KiB. */
const JOBS_PER_PAGE = 16;
const FRAMES_PER_PAGE = 64;
/** Most bytes bound in one D1 batch of inserts. */
const BATCH_BYTES = 4 << 20;

interface Columns {
  table: string;
  names: string[];
  blobs: Set<string>;
}

/** The columns of `table` that both databases have (but `skip`), and which of them hold blobs. */
async function columnsOf(from: D1Database, to: D1Database, table: string, skip: string[] = []): Promise<Columns> {
  const info = (db: D1Database) =>
    db.prepare(`SELECT name, type FROM pragma_table_info(?1)`).bind(table).all<{ name: string; type: string }>();
  const [a, b] = await Promise.all([info(from), info(to)]);
  const there = new Set(b.results.map((c) => c.name));
  const cols = a.results.filter((c) => there.has(c.name) && !skip.includes(c.name));
  return { table, names: cols.map((c) => c.name), blobs: new Set(cols.filter((c) => /BLOB/i.test(c.type)).map((c) => c.name)) };
}

/** SELECT list: every column, and for a blob column its storage type as `<name>__t`. */
const selectList = (c: Columns, t = '') =>
  c.names.map((n) => (c.blobs.has(n) ? `${t}${n}, typeof(${t}${n}) AS ${n}__t` : `${t}${n}`)).join(', ');

/** A row's value of column `n` ready to bind: a blob as bytes, text as text, as it was stored. */
function bindable(c: Columns, row: Record<string, unknown>, n: string): { v: unknown; bytes: number } {
  const v = row[n];
  if (v === null || v === undefined) return { v: null, bytes: 0 };
  if (c.blobs.has(n) && row[`${n}__t`] === 'blob') {
    const b = v instanceof ArrayBuffer ? new Uint8Array(v) : Uint8Array.from(v as number[]);
    return { v: b, bytes: b.length };
  }
  return { v, bytes: typeof v === 'string' ? v.length : 8 };
}

function insertOf(db: D1Database, c: Columns, row: Record<string, unknown>, override: Record<string, unknown> = {}, returning = '') {
  let bytes = 0;
  const args = c.names.map((n) => {
    if (n in override) return override[n];
    const b = bindable(c, row, n);
    bytes += b.bytes;
    return b.v;
  });
  const sql = `INSERT INTO ${c.table} (${c.names.join(', ')}) VALUES (${c.names.map((_, i) => `?${i + 1}`).join(', ')}) ${returning}`;
  return { stmt: db.prepare(sql).bind(...args), bytes };
}

/** Runs statements in D1 batches of at most BATCH_BYTES bound (and 50 statements); answers every result in order. */
async function inBatches(db: D1Database, items: { stmt: D1PreparedStatement; bytes: number }[]): Promise<D1Result[]> {
  const out: D1Result[] = [];
  let part: D1PreparedStatement[] = [];
  let bytes = 0;
  const flush = async () => {
    if (part.length) out.push(...(await db.batch(part)));
    part = [];
    bytes = 0;
  };
  for (const it of items) {
    if (part.length && (part.length >= 50 || bytes + it.bytes > BATCH_BYTES)) await flush();
    part.push(it.stmt);
    bytes += it.bytes;
  }
  await flush();
  return out;
}

export interface Copied {
  jobs: number;
  frames: number;
  queues: number;
  schedules: number;
}

/**
 * Copies every row of `ns` from `from` to `to`. The target must hold none of it (deleteNamespace
 * first). Jobs go first, in row order, then their frames, then the level counts (replacing what
 * the insert triggers made), the queues' settings, the schedules and the workers the jobs name
 * (their numbers kept: sql/workers.ts).
 */
export async function copyNamespace(from: D1Database, to: D1Database, ns: string): Promise<Copied> {
  const inv = await columnsOf(from, to, 'invocations', ['rid']);
  const fr = await columnsOf(from, to, 'frames');
  const ridOf = new Map<number, number>();
  for (let after = -1; ; ) {
    const page = await from
      .prepare(`SELECT rid, ${selectList(inv)} FROM invocations WHERE ns = ?1 AND rid > ?2 ORDER BY rid LIMIT ${JOBS_PER_PAGE}`)
      .bind(ns, after)
      .all<Record<string, unknown>>();
    if (!page.results.length) break;
    const made = await inBatches(
      to,
      page.results.map((r) => insertOf(to, inv, r, {}, 'RETURNING rid')),
    );
    for (const [i, r] of page.results.entries()) ridOf.set(Number(r.rid), Number((made[i]!.results[0] as { rid: number }).rid));
    after = Number(page.results[page.results.length - 1]!.rid);
  }
  let frameCount = 0;
  for (let after: [number, number] = [-1, -1]; ; ) {
    const page = await from
      .prepare(
        `SELECT ${selectList(fr, 'f.')} FROM frames f JOIN invocations i ON i.rid = f.inv
          WHERE i.ns = ?1 AND (f.inv, f.seq) > (?2, ?3) ORDER BY f.inv, f.seq LIMIT ${FRAMES_PER_PAGE}`,
      )
      .bind(ns, after[0], after[1])
      .all<Record<string, unknown>>();
    if (!page.results.length) break;
    await inBatches(
      to,
      page.results.map((r) => insertOf(to, fr, r, { inv: ridOf.get(Number(r.inv)) })),
    );
    frameCount += page.results.length;
    const last = page.results[page.results.length - 1]!;
    after = [Number(last.inv), Number(last.seq)];
  }
  // The finished jobs whose frames wait for their queue's journal retention (a trigger notes them
  // as they finish; a copied job arrives finished, so its note is copied too).
  const due = await columnsOf(from, to, 'journals_due');
  for (let after = -1; ; ) {
    const page = await from
      .prepare(`SELECT ${selectList(due)} FROM journals_due WHERE ns = ?1 AND inv > ?2 ORDER BY inv LIMIT ${JOBS_PER_PAGE}`)
      .bind(ns, after)
      .all<Record<string, unknown>>();
    if (!page.results.length) break;
    await inBatches(
      to,
      page.results.map((r) => insertOf(to, due, r, { inv: ridOf.get(Number(r.inv)) })),
    );
    after = Number(page.results[page.results.length - 1]!.inv);
  }
  const rest = { queues: 0, schedules: 0 };
  for (const table of ['queue_levels', 'queues', 'schedules', 'workers'] as const) {
    const c = await columnsOf(from, to, table);
    const rows = (
      await from
        .prepare(`SELECT ${selectList(c)} FROM ${table} WHERE ns = ?1`)
        .bind(ns)
        .all<Record<string, unknown>>()
    ).results;
    // The insert triggers made level rows as the jobs came in; the source's counts replace them.
    if (table === 'queue_levels') await to.prepare(`DELETE FROM queue_levels WHERE ns = ?1`).bind(ns).run();
    else if (table !== 'workers') rest[table] = rows.length;
    await inBatches(
      to,
      rows.map((r) => insertOf(to, c, r)),
    );
  }
  return { jobs: ridOf.size, frames: frameCount, ...rest };
}

/** What a copy must agree on: jobs by queue and state, their bytes and workers, frames and their bytes, settings, schedules and workers. */
export async function fingerprint(db: D1Database, ns: string): Promise<string> {
  const [jobs, framesOf, rest] = await db.batch([
    db
      .prepare(
        `SELECT queue, state, count(*) AS n, sum(length(envelope)) AS e, sum(ifnull(length(result), 0)) AS r, sum(attempt) AS a,
                sum(ifnull(worker, 0)) AS w
           FROM invocations WHERE ns = ?1 GROUP BY queue, state ORDER BY queue, state`,
      )
      .bind(ns),
    db.prepare(`SELECT count(*) AS n, sum(length(f.body)) AS b FROM frames f JOIN invocations i ON i.rid = f.inv WHERE i.ns = ?1`).bind(ns),
    db
      .prepare(
        `SELECT (SELECT count(*) FROM queues WHERE ns = ?1) AS q, (SELECT count(*) FROM schedules WHERE ns = ?1) AS s,
                (SELECT count(*) FROM journals_due WHERE ns = ?1) AS j,
                (SELECT count(*) || ':' || sum(n) || ':' || sum(length(name)) FROM workers WHERE ns = ?1) AS w,
                (SELECT group_concat(queue || ':' || priority || ':' || queued, '|') FROM queue_levels WHERE ns = ?1) AS l`,
      )
      .bind(ns),
  ]);
  return JSON.stringify([jobs!.results, framesOf!.results, rest!.results]);
}

/** Deletes every row of `ns` on `db`, a bounded number a statement (a copy left by a move, on the shard it left). */
export async function deleteNamespace(db: D1Database, ns: string): Promise<void> {
  for (;;) {
    const [f, i] = await db.batch([
      db.prepare(`DELETE FROM frames WHERE inv IN (SELECT rid FROM invocations WHERE ns = ?1 ORDER BY rid LIMIT 500)`).bind(ns),
      db.prepare(`DELETE FROM invocations WHERE rid IN (SELECT rid FROM invocations WHERE ns = ?1 ORDER BY rid LIMIT 500)`).bind(ns),
    ]);
    // The next 500 jobs' frames, then those jobs, until none is left.
    if (!(f!.meta.changes ?? 0) && !(i!.meta.changes ?? 0)) break;
  }
  await db.batch([
    db.prepare(`DELETE FROM queue_levels WHERE ns = ?1`).bind(ns),
    db.prepare(`DELETE FROM queues WHERE ns = ?1`).bind(ns),
    db.prepare(`DELETE FROM schedules WHERE ns = ?1`).bind(ns),
    db.prepare(`DELETE FROM workers WHERE ns = ?1`).bind(ns),
  ]);
}
