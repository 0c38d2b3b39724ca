/**
 * Bytes per finished job under the plane's row layout and under leaner layouts it could adopt:
 * what each change saves, measured, before anyone rewrites the SQL of every verb for it.
 *
 * Each layout is a table and its indexes in a fresh SQLite file (4 KiB pages, as D1's), filled with
 * N finished jobs as `bench/sizing.ts` makes them (namespace `sizing`, queue `q`, a 12-character
 * id, a 100-byte envelope, a 16-byte result, the worker id `gpu-node-17:48213:9f3a2c1e`, four
 * millisecond times), in the order jobs finish; `dbstat` then gives the pages each table and index
 * holds, less those of the empty schema. Pages, not bytes of rows: a row a few bytes shorter that
 * does not fit one more row on a page saves nothing, on D1 as here.
 *
 * The layouts combine four changes to the columns with four shapes of the B-trees:
 *   columns  S  the state a small integer (succeeded = 4), not its name
 *            W  the worker id a number, its text kept once in a table of workers
 *            T  updated, started and finished as milliseconds after created
 *            N  the namespace and the queue numbers, in the row and in every index
 *   trees    today    a rowid table, the (ns, id) index and the finished-jobs index (ns, queue, state, rid)
 *            no-fin   the same without the finished-jobs index (listings of finished jobs, their
 *                     counts by state and retention would then read the table)
 *            by-id    the table WITHOUT ROWID on (ns, id), so it is the id index; rid a column;
 *                     the finished-jobs index kept
 *            by-id-only  WITHOUT ROWID on (ns, id) and no other index
 *            archive  a job moved, as it finishes, out of the table of live jobs into one of
 *                     finished jobs: written once at its final size, WITHOUT ROWID on the
 *                     listing's order (ns, queue, state, rid), so that table is the finished-jobs
 *                     index, with a unique (ns, id) index; its columns only those a finished job
 *                     keeps (no priority, lease, run_at, expires_at, max_attempts, budget or
 *                     updated_at). The live table's pages are freed as its jobs leave, and the
 *                     next submits reuse them, so a finished job's bytes are the archive's.
 * Each layout is filled twice: with its rows written as the plane writes them (500 submitted, then
 * claimed together, then acked one by one, as `bench/sizing.ts` does: a row grows at its claim and
 * its ack, and a page it no longer fits is split), and with each row written once, finished (what
 * the rows would take if they never grew). The first cell (no change, today's trees) is the plane
 * as it was before its worker became a number: it checks this model against `bench/sizing.ts`,
 * which measured the real plane at 292-295 bytes at 100 x 0 (291 with W).
 *
 *   node scripts/run.mjs node bench/row-designs.ts [--n=20000]
 *
 * Prints a markdown table: bytes per finished job, by column changes and trees, written as the
 * plane writes them and (in brackets) written finished.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';

const N = Number(process.argv.find((a) => a.startsWith('--n='))?.slice(4) ?? '20000');

/**
 * Today's columns (migration 0008), but for one word: the priority is NUMERIC here, not REAL. Once a
 * table has an index, Node's SQLite writes a REAL 0.0 as an 8-byte float, where D1 writes the same
 * value as the integer 0, in no bytes at all; NUMERIC gets D1's bytes.
 */
const COLUMNS = `rid integer PRIMARY KEY NOT NULL, ns text NOT NULL, queue text NOT NULL, id text NOT NULL, key text,
  priority numeric DEFAULT 0 NOT NULL, parent text, envelope blob NOT NULL, state text NOT NULL, attempt integer DEFAULT 0 NOT NULL,
  worker_id text, lease_until integer, result blob, error text, created_at integer NOT NULL, updated_at integer NOT NULL,
  started_at integer, finished_at integer, trimmed integer DEFAULT -1 NOT NULL, run_at integer, expires_at integer,
  max_attempts integer, budget_from integer DEFAULT 0 NOT NULL`;
const INSERT = `INSERT INTO invocations (rid, ns, queue, id, priority, envelope, state, attempt, worker_id, result,
  created_at, updated_at, started_at, finished_at) VALUES (?, ?, ?, ?, 0, ?, ?, 1, ?, ?, ?, ?, ?, ?)`;

const CHANGES = ['S', 'W', 'T', 'N'] as const;
type Change = (typeof CHANGES)[number];
const TREES = ['today', 'no-fin', 'by-id', 'by-id-only', 'archive'] as const;
type Trees = (typeof TREES)[number];

const envelope = 'e'.repeat(100);
const result = new TextEncoder().encode(JSON.stringify('r'.repeat(14)));

function schema(changes: Set<Change>, trees: Trees): string[] {
  let cols = COLUMNS;
  if (changes.has('S')) cols = cols.replace('state text', 'state integer');
  if (changes.has('W')) cols = cols.replace('worker_id text', 'worker_id integer');
  if (changes.has('N')) cols = cols.replace('ns text', 'ns integer').replace('queue text', 'queue integer');
  const finished = changes.has('S') ? 'state >= 4' : `state IN ('succeeded', 'failed', 'cancelled')`;
  const finIndex = `CREATE INDEX invocations_finished ON invocations (ns, queue, state, rid) WHERE ${finished}`;
  const idIndex = 'CREATE UNIQUE INDEX invocations_ns_id ON invocations (ns, id)';
  const byId = `CREATE TABLE invocations (${cols.replace('rid integer PRIMARY KEY NOT NULL', 'rid integer NOT NULL')}, PRIMARY KEY (ns, id)) WITHOUT ROWID`;
  switch (trees) {
    case 'today':
      return [`CREATE TABLE invocations (${cols})`, idIndex, finIndex];
    case 'no-fin':
      return [`CREATE TABLE invocations (${cols})`, idIndex];
    case 'by-id':
      return [byId, finIndex];
    case 'by-id-only':
      return [byId];
    case 'archive':
      return [ARCHIVE(changes), 'CREATE UNIQUE INDEX invocations_done_ns_id ON invocations_done (ns, id)'];
  }
}

/** The archive's table: a finished job's columns, keyed by the listing's order. */
const ARCHIVE = (changes: Set<Change>) => `CREATE TABLE invocations_done (
  ns ${changes.has('N') ? 'integer' : 'text'} NOT NULL, queue ${changes.has('N') ? 'integer' : 'text'} NOT NULL,
  state ${changes.has('S') ? 'integer' : 'text'} NOT NULL, rid integer NOT NULL, id text NOT NULL, key text, parent text,
  envelope blob NOT NULL, attempt integer NOT NULL, worker_id ${changes.has('W') ? 'integer' : 'text'}, result blob, error text,
  created_at integer NOT NULL, started_at integer, finished_at integer NOT NULL, trimmed integer DEFAULT -1 NOT NULL,
  PRIMARY KEY (ns, queue, state, rid)) WITHOUT ROWID`;
const ARCHIVE_INSERT = `INSERT INTO invocations_done (rid, ns, queue, id, envelope, state, attempt, worker_id, result, created_at,
  started_at, finished_at) VALUES (?, ?, ?, ?, ?, ?, 1, ?, ?, ?, ?, ?)`;

/** Job i's values: submitted at created, started 144 ms later, finished 40 ms after that. */
function values(changes: Set<Change>, i: number): (string | number | Uint8Array)[] {
  const created = 1_796_376_030_386 + i * 3;
  const [started, finished] = changes.has('T') ? [144, 184] : [created + 144, created + 184];
  return [
    i + 1,
    changes.has('N') ? 3 : 'sizing',
    changes.has('N') ? 2 : 'q',
    `job-${String(i).padStart(8, '0')}`,
    envelope,
    changes.has('S') ? 4 : 'succeeded',
    changes.has('W') ? 17 : 'gpu-node-17:48213:9f3a2c1e',
    result,
    created,
    finished,
    started,
    finished,
  ];
}

const pagesByName = (db: DatabaseSync) =>
  new Map(
    (db.prepare('SELECT name, sum(pgsize) AS b FROM dbstat GROUP BY name').all() as { name: string; b: number }[]).map((r) => [
      r.name,
      Number(r.b),
    ]),
  );

/**
 * The plane's own order of writes, as `bench/sizing.ts` makes them: 500 jobs submitted (their rows
 * as a submit writes them: queued, no worker, times or result), claimed together (the row grows:
 * its worker, start and lease), then acked one by one (its result and finish; the lease cleared).
 */
function lifecycle(db: DatabaseSync, changes: Set<Change>): void {
  const insert = db.prepare(`INSERT INTO invocations (rid, ns, queue, id, priority, envelope, state, attempt, created_at, updated_at)
    VALUES (?, ?, ?, ?, 0, ?, ?, 0, ?, ?)`);
  const claim = db.prepare(`UPDATE invocations SET state = ?, attempt = 1, worker_id = ?, started_at = ?, updated_at = ?, lease_until = ?
    WHERE rid = ?`);
  const ack = db.prepare('UPDATE invocations SET state = ?, result = ?, lease_until = NULL, updated_at = ?, finished_at = ? WHERE rid = ?');
  const [queued, running] = changes.has('S') ? [1, 2] : ['queued', 'running'];
  for (let from = 0; from < N; from += 500) {
    const upTo = Math.min(N, from + 500);
    db.exec('BEGIN');
    for (let i = from; i < upTo; i++) {
      const [rid, ns, queue, id, env, , , , created] = values(changes, i);
      insert.run(rid!, ns!, queue!, id!, env!, queued, created!, changes.has('T') ? 0 : created!);
    }
    db.exec('COMMIT');
    db.exec('BEGIN');
    for (let i = from; i < upTo; i++) {
      const [rid, , , , , , worker, , created, , started] = values(changes, i);
      claim.run(running, worker!, started!, started!, (created as number) + 30_000, rid!);
    }
    db.exec('COMMIT');
    for (let i = from; i < upTo; i++) {
      const [rid, , , , , state, , res, , updated, , finished] = values(changes, i);
      ack.run(state!, res!, updated!, finished!, rid!);
    }
  }
}

function bytesPerJob(changes: Set<Change>, trees: Trees, dir: string, grown: boolean): number {
  const db = new DatabaseSync(join(dir, `${[...changes].join('')}-${trees}-${grown}.sqlite`));
  try {
    db.exec('PRAGMA page_size = 4096');
    // No sync to disk at each commit (20,000 acks one by one): the pages laid out are the same.
    db.exec('PRAGMA synchronous = OFF');
    for (const s of schema(changes, trees)) db.exec(s);
    const before = pagesByName(db);
    if (trees === 'archive') {
      // Written once, as each job finishes (acks come in order here, as in `lifecycle`).
      const ins = db.prepare(ARCHIVE_INSERT);
      db.exec('BEGIN');
      for (let i = 0; i < N; i++) {
        const [rid, ns, queue, id, env, state, worker, res, created, , started, finished] = values(changes, i);
        ins.run(rid!, ns!, queue!, id!, env!, state!, worker!, res!, created!, started!, finished!);
      }
      db.exec('COMMIT');
    } else if (grown) lifecycle(db, changes);
    else {
      const ins = db.prepare(INSERT);
      db.exec('BEGIN');
      for (let i = 0; i < N; i++) ins.run(...values(changes, i));
      db.exec('COMMIT');
    }
    let bytes = 0;
    for (const [name, b] of pagesByName(db)) if (name.startsWith('invocations')) bytes += b - (before.get(name) ?? 0);
    return bytes / N;
  } finally {
    db.close();
  }
}

const dir = mkdtempSync(join(tmpdir(), 'lakeshore-row-designs-'));
try {
  const rows: string[] = [];
  // Every subset of the four changes, fewest first.
  const subsets = Array.from({ length: 16 }, (_, m) => new Set(CHANGES.filter((_, k) => m & (1 << k))));
  subsets.sort((a, b) => a.size - b.size);
  const cell = (c: number) => (c <= 200 ? `**${c}**` : String(c));
  for (const changes of subsets) {
    const cells = TREES.map((t) => [bytesPerJob(changes, t, dir, false), bytesPerJob(changes, t, dir, true)].map(Math.round));
    rows.push(`| ${[...changes].join(' + ') || 'none'} | ${cells.map(([f, g]) => `${cell(g!)} (${cell(f!)})`).join(' | ')} |`);
  }
  console.log(
    `bytes per finished 100-byte job (${N} jobs; bold: at most 200): written as the plane writes them, submitted, claimed, acked (and, in brackets, written finished)\n`,
  );
  console.log(`| column changes | ${TREES.join(' | ')} |`);
  console.log(`|---|${TREES.map(() => '---').join('|')}|`);
  console.log(rows.join('\n'));
} finally {
  rmSync(dir, { recursive: true, force: true });
}
