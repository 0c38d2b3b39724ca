/**
 * Bytes per job in D1: how much of a shard one finished job occupies, by envelope size and frame
 * count, and the sustained jobs/s a 10 GB shard holds at 1, 7 and 14 days of retention.
 *
 * Each case starts the plane (`scripts/serve.mjs`: workerd and its local D1), submits N jobs with
 * envelopes of the case's size (opaque bytes), runs them at the verbs as a worker does (claim; the
 * case's frames: BEGIN, that many VALUEs of 32 bytes, END, as a generator writes them; none for a
 * plain function; an ack with a 16-byte result), then reads D1's own SQLite file with `dbstat`: the
 * bytes of each table and index, less what they held before the jobs (the empty schema). The file
 * is D1's as workerd keeps it: the tables and indexes a deployed D1 holds, as SQLite lays them out.
 *
 *   node scripts/run.mjs node bench/sizing.ts [--n=5000] [--cases=100x0,1000x0,100x8,100x8j,1000x8,1000x8j,10000x0] [--ids=short|default|uuid] [--keep]
 *
 * A case ending in `j` runs on a queue whose frames are kept for less than its jobs
 * (journal_retention_ms 0): it is measured once the retention pass has removed the frames of every
 * finished job, the jobs themselves staying (their bytes after the window). SQLite reuses the
 * pages the frames leave for the rows that come next, so the tables' pages are what a shard holds.
 *
 * --ids=default gives each job the id a submit without one gets from the clients (client/ids.ts
 * jobId: 20 characters, time first); --ids=uuid a random UUID (36 characters, what they gave
 * before); without either, a short id of the caller's (`job-00000042`, 12 characters).
 * --keep leaves each case's D1 file in place and prints its path, to look into.
 *
 * Prints one JSON line per case, then a markdown table (docs/deploy.md, "Sizing").
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { jobId } from '../client/ids.ts';
import { FrameKind, HttpDispatch } from '../client/local/index.ts';
import { newToken, startPlane } from '../scripts/plane.mjs';

const arg = (name: string, dflt: string) => process.argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3) ?? dflt;
const N = Number(arg('n', '5000'));
const CASES = arg('cases', '100x0,1000x0,100x8,100x8j,1000x8,1000x8j,10000x0')
  .split(',')
  .map((c) => {
    const [size, frames] = c.replace(/j$/, '').split('x').map(Number) as [number, number];
    return [size, frames, c.endsWith('j')] as const;
  });
/** What a shard holds before it refuses submits: D1's 10 GB at the default high-water mark, 90 %. */
const SHARD_BYTES = 10e9 * 0.9;
const IDS = arg('ids', 'short');

/** The D1 file of the plane's one database (the largest .sqlite under the persist dir). */
function d1File(dir: string): string {
  const files: string[] = [];
  const walk = (d: string) => {
    for (const e of readdirSync(d, { withFileTypes: true })) {
      const p = join(d, e.name);
      if (e.isDirectory()) walk(p);
      else if (e.name.endsWith('.sqlite') && p.includes('d1')) files.push(p);
    }
  };
  walk(dir);
  if (!files.length) throw new Error(`no D1 file under ${dir}`);
  return files.sort((a, b) => statSync(b).size - statSync(a).size)[0]!;
}

/** Bytes per table and index: pages (`pgsize`) and what the rows fill of them (`pgsize - unused`). */
function objects(file: string): Map<string, { pages: number; used: number }> {
  const db = new DatabaseSync(file, { readOnly: true });
  try {
    const rows = db.prepare('SELECT name, sum(pgsize) AS pages, sum(pgsize - unused) AS used FROM dbstat GROUP BY name').all() as {
      name: string;
      pages: number;
      used: number;
    }[];
    return new Map(rows.map((r) => [r.name, { pages: Number(r.pages), used: Number(r.used) }]));
  } finally {
    db.close();
  }
}

const results: { envelope: number; frames: number; window: boolean; perJob: number; usedPerJob: number; by: Record<string, number> }[] = [];
for (const [size, frames, window] of CASES) {
  const dir = mkdtempSync(join(tmpdir(), 'lakeshore-sizing-'));
  const token = newToken('lsk_bench_');
  const plane = await startPlane({
    node: process.execPath,
    env: process.env,
    persistTo: dir,
    quiet: true,
    vars: { LAKESHORE_TOKEN: token, LIMIT_REQUESTS_PER_SECOND: '1000000', LIMIT_REQUEST_BURST: '1000000' },
  });
  try {
    const d = new HttpDispatch(plane.url, { token, namespace: 'sizing' });
    await d.count('q'); // the namespace's directory row and its queue object, before the baseline
    if (window) await d.configureQueue('q', { journalRetentionMs: 0 });
    const before = objects(d1File(dir));
    // The envelope: opaque bytes of exactly `size` (the plane never reads them).
    const envelope = new TextEncoder().encode('e'.repeat(size));
    for (let i = 0; i < N; i += 500) {
      const items = Array.from({ length: Math.min(500, N - i) }, (_, k) => ({
        envelope,
        opts: { id: IDS === 'default' ? jobId() : IDS === 'uuid' ? randomUUID() : `job-${String(i + k).padStart(8, '0')}` },
      }));
      await d.submitMany('q', items);
    }
    // A worker at the verbs: claim, write the case's frames (BEGIN, VALUEs of 32 bytes, END), ack
    // with a 16-byte result. Its id is a typical `host:pid:random` one.
    const workerId = 'gpu-node-17:48213:9f3a2c1e';
    const result = new TextEncoder().encode(JSON.stringify('r'.repeat(14)));
    const value = new TextEncoder().encode(JSON.stringify('v'.repeat(30)));
    for (;;) {
      const got = await d.claimMany('q', workerId, 500);
      if (!got.length) break;
      await Promise.all(
        got.map(async (c) => {
          if (frames > 0) {
            await d.journalAppend(c.id, null, { kind: FrameKind.BEGIN, seq: 0, body: new Uint8Array(), meta: null }, { workerId });
            for (let f = 0; f < frames; f++)
              await d.journalAppend(c.id, null, { kind: FrameKind.VALUE, seq: 0, body: value, meta: null }, { workerId });
            await d.journalAppend(
              c.id,
              null,
              { kind: FrameKind.END, seq: 0, body: new Uint8Array(), meta: null },
              { workerId, final: true },
            );
          }
          await d.ack(c.id, workerId, { result });
        }),
      );
    }
    if ((await d.count('q', 'succeeded')) !== N) throw new Error(`expected ${N} succeeded jobs`);
    // The window passed at once (0 ms): wait for the queue's passes to remove every finished job's
    // frames (read from D1's file: none left, and no job waiting for its frames' removal).
    for (let t = Date.now(); window && frames > 0; ) {
      const db = new DatabaseSync(d1File(dir), { readOnly: true });
      const left = db.prepare('SELECT (SELECT count(*) FROM frames) + (SELECT count(*) FROM journals_due) AS n').get() as { n: number };
      db.close();
      if (Number(left.n) === 0) break;
      if (Date.now() - t > 60_000) throw new Error(`${left.n} frames and notes were still there after 60 s`);
      await new Promise((r) => setTimeout(r, 200));
    }
    await d.close();
    const after = objects(d1File(dir));
    const by: Record<string, number> = {};
    let pages = 0;
    let used = 0;
    for (const [name, a] of after) {
      const b = before.get(name) ?? { pages: 0, used: 0 };
      const grew = a.pages - b.pages;
      if (grew <= 0) continue;
      by[name] = +(grew / N).toFixed(1);
      pages += grew;
      used += a.used - b.used;
    }
    const r = {
      envelope: size,
      frames,
      window,
      ids: IDS === 'default' ? 'default (jobId, 20 characters)' : IDS === 'uuid' ? 'UUID' : 'short',
      perJob: Math.round(pages / N),
      usedPerJob: Math.round(used / N),
      by,
    };
    results.push(r);
    console.log(JSON.stringify({ jobs: N, ...r }));
  } finally {
    await plane.stop();
    if (process.argv.includes('--keep')) console.error(`kept: ${d1File(dir)}`);
    else rmSync(dir, { recursive: true, force: true });
  }
}

const perSecond = (bytes: number, days: number) => {
  const r = SHARD_BYTES / (bytes * days * 86_400);
  return r < 10 ? r.toFixed(1) : Math.floor(r).toLocaleString('en');
};
console.log(
  '\n| envelope | frames (BEGIN, VALUEs of 32 B, END) | bytes per finished job | jobs/s a shard sustains (9 GB: 10 GB at the 90 % mark) at 1 / 7 / 14 days of retention |',
);
console.log('|---|---|---|---|');
for (const r of results)
  console.log(
    `| ${r.envelope.toLocaleString('en')} B | ${r.frames ? `${r.frames + 2}${r.window ? ', after their window (journal_retention_ms)' : ''}` : 'none'} | ${r.perJob.toLocaleString('en')} | ${perSecond(r.perJob, 1)} / ${perSecond(r.perJob, 7)} / ${perSecond(r.perJob, 14)} |`,
  );
