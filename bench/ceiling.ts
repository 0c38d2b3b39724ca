/**
 * The edge plane's ceilings on this machine, for the single-submit case: round trips at idle
 * (`/health`; a route that reads D1 once; one coalesced submit) and enqueue-only throughput of
 * the workload's 8 single-submit loops with no worker at all. Eight loops that each wait for
 * their own submit can go no faster than 8 per submit round trip. Prints one JSON line.
 *
 *   node scripts/run.mjs node bench/ceiling.ts [--n=8000]
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { encodeEnvelope, HttpDispatch } from '../client/index.ts';
// @ts-expect-error plain JS helper shared with `npm start`
import { newToken, startPlane } from '../scripts/plane.mjs';

const N = Number(process.argv.find((a) => a.startsWith('--n='))?.slice(4) ?? 8000);
const dir = mkdtempSync(join(process.env.BENCH_STATE_DIR ?? tmpdir(), 'lakeshore-ceiling-'));
const token = newToken('lsk_bench_');
const plane = await startPlane({ node: process.execPath, env: process.env, persistTo: dir, vars: { LAKESHORE_TOKEN: token } });
const d = new HttpDispatch(plane.url, { token, namespace: 'ceiling' });
const headers = { authorization: `Bearer ${token}` };
const env = (i: number) => encodeEnvelope({ fn: 'noop', args: [i, 'x'.repeat(100)] });

async function p50(f: () => Promise<unknown>, n = 300): Promise<number> {
  for (let i = 0; i < 20; i++) await f();
  const t: number[] = [];
  for (let i = 0; i < n; i++) {
    const t0 = performance.now();
    await f();
    t.push(performance.now() - t0);
  }
  return +t.sort((a, b) => a - b)[n >> 1]!.toFixed(2);
}

let k = 0;
const rtt = {
  health: await p50(() => fetch(`${plane.url}/health`).then((r) => r.text())),
  d1_read: await p50(() => fetch(`${plane.url}/v1/ns/ceiling/queues/none/count`, { headers }).then((r) => r.text())),
  submit: await p50(() => d.submit('warm', env(k), { id: `w${k++}` })),
};
let next = 0;
const t0 = performance.now();
await Promise.all(Array.from({ length: 8 }, async () => {
  while (next < N) {
    const i = next++;
    await d.submit('q', env(i), { id: `j${i}` });
  }
}));
const s = (performance.now() - t0) / 1000;
await d.close();
await plane.stop();
rmSync(dir, { recursive: true, force: true });
console.log(JSON.stringify({ system: 'lakeshore-edge', mode: 'ceiling', rtt_p50_ms: rtt, enqueue_only: { P: 8, N, jobs_per_s: Math.round(N / s), ms_per_round: +((s * 1000) / (N / 8)).toFixed(2) } }));
process.exit(0);
