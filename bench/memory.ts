/**
 * Local-plane memory against queue depth: fills one queue to 10,000 and then to 200,000 queued
 * invocations, and at each depth runs 2,000 submit/claim/ack cycles before reading the process's
 * resident memory. Flat means the plane keeps no per-row state in memory. Prints one JSON line.
 *
 * The filling is done by a child process on the same database file (the local plane is shared
 * between processes): filled in this one, the 200,000 submits' own garbage stayed in the measured
 * process's heap (V8 keeps the pages: ~40 MB of heapTotal over 7 MB used), and that, not the
 * plane, was most of the growth (116 MB at 10,000, 136 at 100,000, 138 at 200,000, 141 at 400,000).
 *
 *   node scripts/run.mjs node --expose-gc bench/memory.ts
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Dispatch } from '../client/local/index.ts';

const env = new Uint8Array(100);

// The filler: `--fill=<db> --to=<depth>` submits until the queue holds that many.
const fill = process.argv.find((a) => a.startsWith('--fill='))?.slice(7);
if (fill) {
  const to = Number(process.argv.find((a) => a.startsWith('--to='))!.slice(5));
  const f = new Dispatch(fill, { namespace: 'mem' });
  for (let n = await f.count('q'); n < to; n += 1000) {
    await f.submitMany(
      'q',
      Array.from({ length: 1000 }, (_, i) => ({ envelope: env, opts: { id: `f${n + i}` } })),
    );
  }
  await f.close();
  process.exit(0);
}

const dir = mkdtempSync(join(process.env.BENCH_STATE_DIR ?? tmpdir(), 'lakeshore-memory-'));
const db = join(dir, 'd.sqlite');
const d = new Dispatch(db, { namespace: 'mem' });
let next = 0;

async function fillTo(depth: number) {
  execFileSync(process.execPath, [...process.execArgv, new URL(import.meta.url).pathname, `--fill=${db}`, `--to=${depth}`], {
    stdio: ['ignore', 'ignore', 'inherit'],
  });
}

async function cycles(n: number) {
  for (let i = 0; i < n; i++) {
    await d.submit('q', env, { id: `c${next++}` });
    const c = (await d.claim('q', 'w'))!;
    await d.ack(c.id, 'w', { attempt: c.attempt });
  }
}

async function rssAt(depth: number) {
  await fillTo(depth);
  await cycles(2_000);
  (globalThis as { gc?: () => void }).gc?.();
  await new Promise((r) => setTimeout(r, 100));
  return +(process.memoryUsage().rss / 2 ** 20).toFixed(1);
}

const shallow = await rssAt(10_000);
const deep = await rssAt(200_000);
await d.close();
rmSync(dir, { recursive: true, force: true });
console.log(
  JSON.stringify({
    system: 'lakeshore-local',
    mode: 'memory',
    rss_mb: { depth_10k: shallow, depth_200k: deep },
    growth: +(deep / shallow - 1).toFixed(3),
  }),
);
process.exit(0);
