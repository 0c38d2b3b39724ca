/**
 * Journal latency: a worker appends frames one at a time to a running invocation while a reader
 * follows its journal (SSE on the edge plane, a blocking read on the local one); the figure is
 * append call → frame received, in one process and one clock. Prints one JSON line.
 *
 *   node scripts/run.mjs node bench/journal.ts [--system=lakeshore-edge|lakeshore-local] [--n=500]
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Dispatch, FrameKind, HttpDispatch, type DispatchPlane } from '../client/local/index.ts';
import { newToken, startPlane } from '../scripts/plane.mjs';

const arg = (name: string, dflt: string) => process.argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3) ?? dflt;
const system = arg('system', 'lakeshore-edge');
const N = Number(arg('n', '500'));
const pct = (s: number[], p: number) => +s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))]!.toFixed(3);

const dir = mkdtempSync(join(process.env.BENCH_STATE_DIR ?? tmpdir(), 'lakeshore-journal-'));
let plane: { stop: () => Promise<void> } | null = null;
/** The producer (submits, reads the journal) and the worker (claims, appends, acks). */
let d: DispatchPlane;
let w: DispatchPlane;
if (system === 'lakeshore-local') w = d = new Dispatch(join(dir, 'd.sqlite'), { namespace: 'bench' });
else {
  const token = newToken('lsk_bench_');
  const p = await startPlane({ node: process.execPath, env: process.env, persistTo: dir, vars: { LAKESHORE_TOKEN: token } });
  plane = p;
  // The tokens users use: the operator's root token makes a producer token and a worker token.
  const op = new HttpDispatch(p.url, { token, namespace: 'bench' });
  d = new HttpDispatch(p.url, { token: (await op.createToken('producer')).token, namespace: 'bench' });
  w = new HttpDispatch(p.url, { token: (await op.createToken('worker')).token, namespace: 'bench' });
  await op.close();
}

await d.submit('q', new Uint8Array([123, 125]), { id: 'j' });
const c = (await w.claim('q', 'w'))!;
const sent = new Float64Array(N);
const got = new Float64Array(N);
const notify = { arrived: () => {} };
const reader = (async () => {
  let n = 0;
  for await (const f of d.journalRead(c.id, { timeoutMs: 600_000 })) {
    if (f.kind !== FrameKind.VALUE) continue;
    got[n++] = performance.now();
    notify.arrived();
    if (n === N) return;
  }
})();
await new Promise((r) => setTimeout(r, 200)); // the reader is attached and waiting
for (let i = 0; i < N; i++) {
  const arrived = new Promise<void>((r) => (notify.arrived = r));
  sent[i] = performance.now();
  await w.journalAppend(
    c.id,
    i,
    { kind: FrameKind.VALUE, seq: i, body: new TextEncoder().encode(`{"i":${i}}`), meta: null },
    { workerId: 'w', attempt: c.attempt },
  );
  await arrived;
  await new Promise((r) => setTimeout(r, Math.random() * 10));
}
await reader;
const lat = Array.from(sent, (t, i) => got[i]! - t).sort((a, b) => a - b);
await w.ack(c.id, 'w', { attempt: c.attempt });
await d.close();
if (w !== d) await w.close();
await plane?.stop();
rmSync(dir, { recursive: true, force: true });
console.log(
  JSON.stringify({
    system,
    mode: 'journal',
    N,
    latency_ms: { p50: pct(lat, 50), p95: pct(lat, 95), p99: pct(lat, 99), max: pct(lat, 100) },
  }),
);
process.exit(0);
