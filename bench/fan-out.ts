/**
 * Fan-out: one job watched by R SSE readers (the edge plane, a stream token minted for R streams)
 * while a worker appends frames one at a time. The figure is append call -> frame received, over
 * every (reader, frame), in one process and one clock; "all" is until the last reader has it. The
 * readers are parsed in this same process, so at R = 1,000 part of the time is the bench's own.
 * Also: the queue object's D1 rows read per append (its stats), which must not grow with R.
 *
 *   node scripts/run.mjs node bench/fan-out.ts [--readers=1000] [--n=200]
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { FrameKind, HttpDispatch, encodeFrame } from '../client/local/index.ts';
import { sseEvents } from '../client/http/sse.ts';
import { newToken, startPlane } from '../scripts/plane.mjs';

const arg = (name: string, dflt: string) => process.argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3) ?? dflt;
const R = Number(arg('readers', '1000'));
const N = Number(arg('n', '200'));
const pct = (s: number[], p: number) => +s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))]!.toFixed(3);

const dir = mkdtempSync(join(process.env.BENCH_STATE_DIR ?? tmpdir(), 'lakeshore-fanout-'));
const token = newToken('lsk_bench_');
const plane = await startPlane({ node: process.execPath, env: process.env, persistTo: dir, vars: { LAKESHORE_TOKEN: token } });
// The tokens users use: the operator's root token (the stats below) makes a producer token (the
// submit, the stream token) and a worker token (the claim, the appends, the ack).
const op = new HttpDispatch(plane.url, { token, namespace: 'bench' });
const d = new HttpDispatch(plane.url, { token: (await op.createToken('producer')).token, namespace: 'bench' });
const w = new HttpDispatch(plane.url, { token: (await op.createToken('worker')).token, namespace: 'bench' });
await op.close();
const stats = async () =>
  (await (await fetch(`${plane.url}/v1/ns/bench/queues/q/stats`, { headers: { authorization: `Bearer ${token}` } })).json()) as {
    read: number;
    streams: number;
  };

await d.submit('q', new Uint8Array([123, 125]), { id: 'j' });
const [c] = await w.claimMany('q', 'w', 1, { leaseMs: 3_600_000 });
const { url } = await d.streamToken('j', { streams: R });
const sent = new Float64Array(N);
/** Per frame: arrival times, one per reader. */
const arrivals = Array.from({ length: N }, () => [] as number[]);
let waiting: { seq: number; done: () => void } | null = null;
// A signal per reader: fetch raises a shared signal's listener cap to 1,500 by itself, and 1,000
// readers put ~3,000 listeners on one.
const acs = Array.from({ length: R }, () => new AbortController());
const readers = acs.map(async (ac) => {
  const res = await fetch(url, { headers: { accept: 'text/event-stream' }, signal: ac.signal });
  for await (const ev of sseEvents(res.body!, ac.signal)) {
    if (ev.event !== 'frame') continue;
    const seq = Number(ev.id);
    const a = arrivals[seq]!;
    a.push(performance.now());
    if (a.length === R && waiting?.seq === seq) waiting.done();
    if (seq === N - 1) return;
  }
});
const t0 = Date.now();
while ((await stats()).streams < R) {
  if (Date.now() - t0 > 120_000) throw new Error('readers did not all connect within 120 s');
  await new Promise((r) => setTimeout(r, 50));
}
const before = await stats();
for (let i = 0; i < N; i++) {
  const all = new Promise<void>((done) => (waiting = { seq: i, done }));
  sent[i] = performance.now();
  await w.journalAppend(
    c!.id,
    i,
    encodeFrame({ kind: FrameKind.VALUE, seq: i, body: new TextEncoder().encode(`{"i":${i}}`), meta: null }),
    { workerId: 'w', attempt: c!.attempt },
  );
  await all;
  await new Promise((r) => setTimeout(r, Math.random() * 10));
}
const after = await stats();
await Promise.all(readers);
for (const ac of acs) ac.abort();
const each = arrivals.flatMap((a, i) => a.map((t) => t - sent[i]!)).sort((a, b) => a - b);
const last = arrivals.map((a, i) => Math.max(...a) - sent[i]!).sort((a, b) => a - b);
await w.ack(c!.id, 'w', { attempt: c!.attempt });
await d.close();
await w.close();
await plane.stop();
rmSync(dir, { recursive: true, force: true });
console.log(
  JSON.stringify({
    system: 'lakeshore-edge',
    mode: 'fan-out',
    readers: R,
    N,
    latency_ms: { p50: pct(each, 50), p99: pct(each, 99), max: pct(each, 100) },
    all_readers_ms: { p50: pct(last, 50), p99: pct(last, 99) },
    rows_read_per_append: +((after.read - before.read) / N).toFixed(2),
  }),
);
process.exit(0);
