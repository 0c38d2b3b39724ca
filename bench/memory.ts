/**
 * Local-plane memory against queue depth: fills one queue to 10,000 and then to 200,000 queued
 * invocations, and at each depth runs 2,000 submit/claim/ack cycles before reading the process's
 * resident memory. Flat means the plane keeps no per-row state in memory. Prints one JSON line.
 *
 *   node scripts/run.mjs node --expose-gc bench/memory.ts
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Dispatch } from '../client/local/index.ts';

const dir = mkdtempSync(join(process.env.BENCH_STATE_DIR ?? tmpdir(), 'lakeshore-memory-'));
const d = new Dispatch(join(dir, 'd.sqlite'), { namespace: 'mem' });
const env = new Uint8Array(100);
let next = 0;

async function fillTo(depth: number) {
  while ((await d.count('q')) < depth) {
    const items = Array.from({ length: 1000 }, () => ({ envelope: env, opts: { id: `f${next++}` } }));
    await d.submitMany('q', items);
  }
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
console.log(JSON.stringify({ system: 'lakeshore-local', mode: 'memory', rss_mb: { depth_10k: shallow, depth_200k: deep }, growth: +(deep / shallow - 1).toFixed(3) }));
process.exit(0);
