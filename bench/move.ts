/**
 * How long a namespace's move takes, and how long its writes wait (src/durable/mover.ts): the
 * plane (`scripts/serve.mjs`: workerd and its local D1, two shards) with a namespace of N jobs,
 * most finished with a few frames, some waiting, moved to the other shard with the root token while
 * producers (one by default) submit one job at a time each throughout. Local D1 answers in well under a millisecond,
 * where Cloudflare's answers in milliseconds: the figures are this machine's, their ratio is what
 * carries over.
 *
 *   node scripts/run.mjs node bench/move.ts [--n=20000] [--step=500] [--producers=1] [--workers=0] [--purge=0] [--queues=1] [--cold]
 *
 * --workers=W: W worker processes more have claimed in the namespace before the move (each a
 * row of its `workers` table, as every worker process a namespace ever saw is: a worker's default
 * id is its host, pid and a random part).
 * --purge=K: while the move runs, K finished jobs at a time are deleted, oldest first, one purge
 * after another (as retention deletes a busy namespace's oldest jobs all along).
 * --queues=Q: Q - 1 more queues, each with a job waiting, so Q queue objects (and the idle one) to fence.
 * --cold: the plane restarted before the move, so every queue object the fence reaches starts
 * then (as on Cloudflare, where an object idle for a minute or two is evicted), but the producer's.
 *
 * Prints one JSON line: the move's status (jobs, steps, ms, fenced_ms, caught_up, rows_read), and
 * what the producer saw: submits made while the move ran, how many of them waited on the fence
 * (answered after a 503), and the longest a submit took.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { FrameKind, HttpDispatch } from '../client/local/index.ts';
import { newToken, startPlane } from '../scripts/plane.mjs';

const arg = (name: string, dflt: string) => process.argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3) ?? dflt;
const N = Number(arg('n', '20000'));
const STEP = arg('step', '500');
const PRODUCERS = Number(arg('producers', '1'));
const WORKERS = Number(arg('workers', '0'));
const PURGE = Number(arg('purge', '0'));
const QUEUES = Number(arg('queues', '1'));
const COLD = process.argv.includes('--cold');

const dir = mkdtempSync(join(tmpdir(), 'lakeshore-move-'));
const token = newToken('lsk_bench_');
const start = (migrate: boolean) =>
  startPlane({
    node: process.execPath,
    env: process.env,
    persistTo: dir,
    quiet: true,
    shards: 2,
    migrate,
    vars: { LAKESHORE_TOKEN: token, LIMIT_REQUESTS_PER_SECOND: '1000000', LIMIT_REQUEST_BURST: '1000000', MOVE_STEP_SUBREQUESTS: STEP },
  });
let plane = await start(true);
try {
  const ns = 'moving';
  let d = new HttpDispatch(plane.url, { token, namespace: ns, retryForMs: 600_000 });
  const envelope = new TextEncoder().encode('e'.repeat(100));
  for (let i = 0; i < N; i += 500)
    await d.submitMany(
      'q',
      Array.from({ length: Math.min(500, N - i) }, (_, k) => ({ envelope, opts: { id: `job-${String(i + k).padStart(8, '0')}` } })),
    );
  // Nine in ten run: two frames each and a result; the rest wait.
  const value = new TextEncoder().encode('"v"');
  for (let done = 0; done < (N * 9) / 10; ) {
    const got = await d.claimMany('q', 'w', Math.min(500, (N * 9) / 10 - done));
    await Promise.all(
      got.map(async (c) => {
        for (let f = 0; f < 2; f++)
          await d.journalAppend(c.id, null, { kind: FrameKind.VALUE, seq: 0, body: value, meta: null }, { workerId: 'w' });
        await d.ack(c.id, 'w', { result: value });
      }),
    );
    done += got.length;
  }
  // Workers that came and went: each one's first claim (on a queue with nothing to claim) registers it.
  for (let i = 0; i < WORKERS; i += 32)
    await Promise.all(
      Array.from({ length: Math.min(32, WORKERS - i) }, (_, k) => d.claimMany('idle', `host-${i + k}:${process.pid}:gone`, 1)),
    );
  for (let i = 1; i < QUEUES; i += 32)
    await Promise.all(
      Array.from({ length: Math.min(32, QUEUES - i) }, (_, k) => d.submit(`other-${i + k}`, envelope, { id: `other-${i + k}` })),
    );
  if (COLD) {
    await d.close();
    await plane.stop();
    plane = await start(false);
    d = new HttpDispatch(plane.url, { token, namespace: ns, retryForMs: 600_000 });
  }
  const from = (await d.storage()).shard;
  const to = from === 'DB' ? 'DB_1' : 'DB';
  // Producers submit one at a time each while the move runs; each submit's time, and whether it met the fence.
  let moving = true;
  const took: number[] = [];
  let fenced = 0;
  const producer = Promise.all(
    Array.from({ length: PRODUCERS }, async (_, p) => {
      for (let i = 0; moving; i++) {
        const t0 = Date.now();
        await d.submit('q', envelope, { id: `live-${p}-${i}` });
        const ms = Date.now() - t0;
        took.push(ms);
        if (ms > 200) fenced++;
      }
    }),
  );
  // Retention's part, when asked: the oldest finished jobs deleted all along.
  let purged = 0;
  const purging = (async () => {
    while (PURGE && moving) purged += await d.purge('q', { state: 'succeeded', limit: PURGE });
  })();
  const t0 = Date.now();
  const m = await d.moveNamespace(to, { waitMs: 1_000 });
  const wall = Date.now() - t0;
  moving = false;
  await producer;
  await purging;
  took.sort((a, b) => a - b);
  console.log(
    JSON.stringify({
      jobs: N,
      step: Number(STEP),
      producers: PRODUCERS,
      workers: WORKERS,
      purged,
      queues: QUEUES,
      cold: COLD,
      move: {
        jobs: m.jobs,
        frames: m.frames,
        steps: m.steps,
        ms: m.ms,
        fenced_ms: m.fencedMs,
        caught_up: m.caughtUp,
        rows_read: m.rowsRead,
      },
      wall_ms: wall,
      fenced_share: +(m.fencedMs / m.ms).toFixed(3),
      producer: { submits: took.length, slower_than_200ms: fenced, p50_ms: took[took.length >> 1], max_ms: took.at(-1) },
    }),
  );
  await d.close();
} finally {
  await plane.stop();
  rmSync(dir, { recursive: true, force: true });
}
