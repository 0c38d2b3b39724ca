/**
 * The edge plane's ceilings on this machine: round trips (`/health`; a route that reads D1 once;
 * one coalesced submit), back to back and each after 20 ms of quiet (the wake-up cost that idle
 * pickups and journal frames pay), and enqueue-only throughput of the workload's 8 single-submit
 * loops with no worker at all. Eight loops that each wait for their own submit can go no faster
 * than 8 per submit round trip. Prints one JSON line.
 *
 *   node scripts/run.mjs node bench/ceiling.ts [--n=8000]
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { encodeEnvelope, HttpDispatch } from '../client/local/index.ts';
import { Transport } from '../client/http/transport.ts';
import { newToken, startPlane } from '../scripts/plane.mjs';
import { cpuMs, treeCpuMs } from './cpu.ts';

const N = Number(process.argv.find((a) => a.startsWith('--n='))?.slice(4) ?? 8000);
const dir = mkdtempSync(join(process.env.BENCH_STATE_DIR ?? tmpdir(), 'lakeshore-ceiling-'));
const token = newToken('lsk_bench_');
const plane = await startPlane({
  node: process.execPath,
  env: process.env,
  persistTo: dir,
  // The 8 loops share one producer token: its request budget (2,000/s by default) raised, as a deployment for this load would.
  vars: { LAKESHORE_TOKEN: token, LIMIT_REQUESTS_PER_SECOND: '1000000', LIMIT_REQUEST_BURST: '1000000' },
});
// The tokens users use: the operator (the root token) makes a producer token, which the loops carry.
const operator = new HttpDispatch(plane.url, { token, namespace: 'ceiling' });
const producer = (await operator.createToken('producer')).token;
await operator.close();
const d = new HttpDispatch(plane.url, { token: producer, namespace: 'ceiling' });
// The round trips go the way the client's calls go (node:http, kept connections: client/http/requester.ts).
const raw = new Transport(plane.url, { token: producer, timeout: 30_000 });
const env = (i: number) => encodeEnvelope({ fn: 'noop', args: [i, 'x'.repeat(100)] });

/** Median round trip of `f`, back to back, or each after `quietMs` with nothing in flight. */
async function p50(f: () => Promise<unknown>, quietMs = 0, n = quietMs ? 150 : 300): Promise<number> {
  for (let i = 0; i < 20; i++) await f();
  const t: number[] = [];
  for (let i = 0; i < n; i++) {
    if (quietMs) await new Promise((r) => setTimeout(r, quietMs));
    const t0 = performance.now();
    await f();
    t.push(performance.now() - t0);
  }
  return +t.sort((a, b) => a - b)[n >> 1]!.toFixed(2);
}

let k = 0;
const probes = {
  health: () => raw.call('GET', '/health'),
  d1_read: () => raw.call('GET', '/v1/ns/ceiling/queues/none/count'),
  submit: () => d.submit('warm', env(k), { id: `w${k++}` }),
};
// The same round trips after 20 ms of quiet, as an idle pickup or a journal frame meets them.
const rtt: Record<string, number> = {};
const rttQuiet: Record<string, number> = {};
for (const [name, f] of Object.entries(probes)) rtt[name] = await p50(f);
for (const [name, f] of Object.entries(probes)) rttQuiet[name] = await p50(f, 20);
let next = 0;
// CPU per job as bench/workload.ts counts it, so a sitting's table sets single's cost beside this one's.
const planeCpu0 = plane.pid ? treeCpuMs(plane.pid) : null;
const clientCpu0 = process.cpuUsage();
const t0 = performance.now();
await Promise.all(
  Array.from({ length: 8 }, async () => {
    while (next < N) {
      const i = next++;
      await d.submit('q', env(i), { id: `j${i}` });
    }
  }),
);
const s = (performance.now() - t0) / 1000;
const planeCpu1 = plane.pid ? treeCpuMs(plane.pid) : null;
const cpuUs = {
  producers: Math.round((cpuMs(process.cpuUsage(clientCpu0)) * 1000) / N),
  plane: planeCpu0 !== null && planeCpu1 !== null ? Math.round(((planeCpu1 - planeCpu0) * 1000) / N) : null,
};
await d.close();
raw.close();
await plane.stop();
rmSync(dir, { recursive: true, force: true });
console.log(
  JSON.stringify({
    system: 'lakeshore-edge',
    mode: 'ceiling',
    rtt_p50_ms: rtt,
    rtt_after_20ms_quiet_p50_ms: rttQuiet,
    enqueue_only: { P: 8, N, jobs_per_s: Math.round(N / s), ms_per_round: +((s * 1000) / (N / 8)).toFixed(2), cpu_us_per_job: cpuUs },
  }),
);
process.exit(0);
