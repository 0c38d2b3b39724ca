/**
 * Gather: a producer submits N jobs (`q.map`) and awaits every result at once
 * (`Promise.all(handles.map((h) => h.result()))`) while a worker drains them (runWorker, a worker
 * token, concurrency W, a handler of `--ms` ms), on the edge plane. Three ways of awaiting, a
 * round each, in turn:
 * - shared: the handles of the client that submitted them, whose waits go out together
 *   (`POST /queues/:queue/results`, client/http/result-waits.ts);
 * - looked-up: the same ids awaited through another client, which does not know their queue: it
 *   looks them up, 1,000 a `POST /invocations/get` (client/http/locate.ts), then waits as shared;
 * - single: the same ids through a client that shares nothing (`coalesce: false`), a
 *   `GET /invocations/:id/result` long-poll (and a connection) each, as before the shared waits.
 * It prints, per round, the wall time from the first await to the last answer, the producer's
 * requests of each kind, and the most sockets its process held open at once.
 *
 *   node scripts/run.mjs node bench/gather.ts [--n=5000] [--rounds=3] [--concurrency=8] [--ms=5]
 */
import { mkdtempSync, readdirSync, readlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Handle, HttpDispatch, Queue, runWorker } from '../client/local/index.ts';
import { newToken, startPlane } from '../scripts/plane.mjs';

const arg = (name: string, dflt: string) => process.argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3) ?? dflt;
const N = Number(arg('n', '5000'));
const ROUNDS = Number(arg('rounds', '3'));
const W = Number(arg('concurrency', '8'));
const MS = Number(arg('ms', '5'));

const dir = mkdtempSync(join(process.env.BENCH_STATE_DIR ?? tmpdir(), 'lakeshore-gather-'));
const token = newToken('lsk_bench_');
const plane = await startPlane({ node: process.execPath, env: process.env, persistTo: dir, vars: { LAKESHORE_TOKEN: token } });
const op = new HttpDispatch(plane.url, { token, namespace: 'bench' });
const producer = (await op.createToken('producer')).token;
const worker = new HttpDispatch(plane.url, { token: (await op.createToken('worker')).token, namespace: 'bench' });
await op.close();

const stop = new AbortController();
const running = runWorker('g', {
  dispatch: worker,
  concurrency: W,
  stop: stop.signal,
  registry: {
    sq: async (x: number) => {
      await new Promise((r) => setTimeout(r, MS));
      return x * x;
    },
  },
});

/** Sockets this process holds now (Linux). */
const sockets = () =>
  readdirSync('/proc/self/fd').filter((f) => {
    try {
      return readlinkSync(`/proc/self/fd/${f}`).startsWith('socket:');
    } catch {
      return false;
    }
  }).length;

/** D1 rows the queue object read so far (its stats, with the operator's token). */
const rowsRead = async () =>
  (
    (await (await fetch(`${plane.url}/v1/ns/bench/queues/g/stats`, { headers: { authorization: `Bearer ${token}` } })).json()) as {
      read: number;
    }
  ).read;

async function round(how: 'shared' | 'looked-up' | 'single') {
  // The last round's idle connections close first (fetch keeps them a few seconds), bounded.
  for (const t0 = Date.now(); sockets() > 50 && Date.now() - t0 < 30_000; ) await new Promise((r) => setTimeout(r, 100));
  const asked = { get: 0, results: 0, result: 0, other: 0 };
  const counting: typeof fetch = (input, init) => {
    const url = String(input instanceof Request ? input.url : input);
    if (url.endsWith('/invocations/get')) asked.get++;
    else if (/\/results$/.test(url)) asked.results++;
    else if (/\/result\?/.test(url)) asked.result++;
    else asked.other++;
    return fetch(input, init);
  };
  const d = new HttpDispatch(plane.url, { token: producer, namespace: 'bench', fetch: counting });
  const handles = await new Queue('g', { dispatch: d }).map(
    'sq',
    Array.from({ length: N }, (_, i) => [i]),
  );
  const waiter =
    how === 'shared'
      ? d
      : new HttpDispatch(plane.url, { token: producer, namespace: 'bench', fetch: counting, coalesce: how !== 'single' });
  asked.other = 0;
  let most = 0;
  const sample = setInterval(() => (most = Math.max(most, sockets())), 20);
  const before = await rowsRead();
  const t0 = performance.now();
  const got = await Promise.all(handles.map((h) => new Handle<number>(h.id, waiter).result()));
  const ms = performance.now() - t0;
  clearInterval(sample);
  const after = await rowsRead();
  if (got[N - 1] !== (N - 1) ** 2) throw new Error(`a wrong answer: ${got[N - 1]}`);
  await d.close();
  if (waiter !== d) await waiter.close();
  // The queue object's D1 rows read while the results were awaited (the worker's claims and acks among them).
  return { how, ms: Math.round(ms), ...asked, sockets: most, d1_rows_read_per_job: +((after - before) / N).toFixed(1) };
}

const rows: Awaited<ReturnType<typeof round>>[] = [];
const ways = ['shared', 'looked-up', 'single'] as const;
for (let r = 0; r < ROUNDS; r++) for (let k = 0; k < ways.length; k++) rows.push(await round(ways[(r + k) % ways.length]!));
console.log(`gather: ${N} jobs, a worker of concurrency ${W}, ${MS} ms a job (the worker's floor: ${Math.round((N * MS) / W)} ms)`);
console.table(rows);
const median = (xs: number[]) => xs.sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const of = (how: string) => rows.filter((r) => r.how === how);
for (const how of ways) {
  const r = of(how);
  console.log(
    `${how}: median ${median(r.map((x) => x.ms))} ms, look-ups ${median(r.map((x) => x.get))}, results calls ${median(r.map((x) => x.results))}, ` +
      `result waits ${median(r.map((x) => x.result))}, most sockets ${median(r.map((x) => x.sockets))}, D1 rows read a job ${median(r.map((x) => x.d1_rows_read_per_job))}`,
  );
}
stop.abort();
await running;
await worker.close();
await plane.stop();
