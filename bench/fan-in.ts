/**
 * Fan-in: the serverless shape of load. C independent connections (default 256), each making single
 * submits one after another, as hundreds of separate functions would: no client-side coalescing,
 * one HTTP request per job (undici, one connection per producer, no pipelining). What makes this
 * fast or slow is the queue object's group commit: submits that arrive while a D1 batch is in
 * flight share the next one. No worker runs; every submitted id must be queued exactly once.
 * Prints one JSON line: submits/s, the submit latency p50/p99 in ms and in D1 round trips (the
 * simulated D1 delay, else the measured idle round trip of a route that reads D1 once), the
 * mean submits per D1 batch and D1's rows per submit (the queue object's /stats).
 *
 *   node scripts/run.mjs node bench/fan-in.ts [--connections=256] [--n=40000] [--d1-delay-ms=0]
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Pool } from 'undici';
import { encodeEnvelope, HttpDispatch } from '../client/local/index.ts';
import { newToken, startPlane } from '../scripts/plane.mjs';

const arg = (k: string, d: string) => process.argv.find((a) => a.startsWith(`--${k}=`))?.slice(k.length + 3) ?? d;
const C = Number(arg('connections', '256'));
const N = Number(arg('n', '40000'));
const DELAY = Number(arg('d1-delay-ms', '0'));
const dir = mkdtempSync(join(process.env.BENCH_STATE_DIR ?? tmpdir(), 'lakeshore-fanin-'));
const token = newToken('lsk_bench_');
const plane = await startPlane({
  node: process.execPath,
  env: process.env,
  persistTo: dir,
  vars: {
    LAKESHORE_TOKEN: token,
    SIMULATED_D1_DELAY_MS: String(DELAY),
    // All producers share one token here: its request budget (2,000/s by default) raised, as a deployment for this load would.
    LIMIT_REQUESTS_PER_SECOND: '1000000',
    LIMIT_REQUEST_BURST: '1000000',
  },
});
const ns = `fanin${Date.now().toString(36)}`;
const pool = new Pool(plane.url, { connections: C, pipelining: 1, keepAliveTimeout: 60_000 });
// The tokens users use: the operator (the root token) makes one producer token, which every
// connection carries (a fleet of producers of one team).
const operator = new HttpDispatch(plane.url, { token, namespace: ns });
const producer = (await operator.createToken('producer')).token;
await operator.close();
const headers = { authorization: `Bearer ${producer}`, 'content-type': 'application/json' };
const envelope = Buffer.from(encodeEnvelope({ fn: 'noop', args: ['x'.repeat(100)] })).toString('base64');

async function call(method: 'GET' | 'POST', path: string, body?: unknown): Promise<unknown> {
  const r = await pool.request({ method, path, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await r.body.text();
  if (r.statusCode >= 300) throw new Error(`${method} ${path}: ${r.statusCode} ${text}`);
  return text ? JSON.parse(text) : null;
}
const submit = (queue: string, id: string) => call('POST', `/v1/ns/${ns}/queues/${queue}/invocations`, { id, envelope });

try {
  // A D1 round trip at idle, the unit latencies are reported in when no delay is simulated.
  const rtts: number[] = [];
  for (let i = 0; i < 120; i++) {
    const t0 = performance.now();
    await call('GET', `/v1/ns/${ns}/queues/none/count`);
    if (i >= 20) rtts.push(performance.now() - t0);
  }
  const pct = (xs: number[], p: number) => xs[Math.min(xs.length - 1, Math.floor((p / 100) * xs.length))]!;
  const d1Rtt =
    DELAY ||
    pct(
      rtts.sort((a, b) => a - b),
      50,
    );
  /** Requests per second of `one` over the C connections for about 3 s (a ceiling of the hops it takes), and their p99 in ms. */
  async function rate(one: () => Promise<unknown>): Promise<{ perS: number; p99: number }> {
    const took: number[] = [];
    const end = performance.now() + 3000;
    const t0 = performance.now();
    await Promise.all(
      Array.from({ length: C }, async () => {
        while (performance.now() < end) {
          const s = performance.now();
          await one();
          took.push(performance.now() - s);
        }
      }),
    );
    took.sort((a, b) => a - b);
    return { perS: Math.round(took.length / ((performance.now() - t0) / 1000)), p99: pct(took, 99) };
  }
  /**
   * A submit's request up to the queue object: the same body with one key too many, so the
   * Worker authenticates, admits, reads, parses and validates it and answers (400) without
   * calling the object. No submit over these connections can go faster than this.
   */
  const refused = async () => {
    const r = await pool.request({
      method: 'POST',
      path: `/v1/ns/${ns}/queues/q/invocations`,
      headers,
      body: JSON.stringify({ id: 'x', envelope, extra: 1 }),
    });
    await r.body.text();
    if (r.statusCode !== 400) throw new Error(`the refused submit answered ${r.statusCode}, not 400`);
  };
  // Ceilings over the same connections: the Worker alone (/health); a submit request's own work in
  // the Worker, with no queue object (refused); the Worker calling the queue object with no D1
  // (its stats). A submit takes all of them and a share of a D1 batch besides.
  //
  // The runtime's own tail: /health's p99 over the same C connections, the floor of any route's p99
  // here. A worker of one line (`return new Response('ok')`) in workerd shows the same on this
  // machine (about 120 ms at 256 connections, where a Node server answers in 8): a closed loop at
  // saturation, served by one thread that does not serve its connections evenly.
  const health = await rate(() => call('GET', '/health'));
  const ceilings = {
    health_per_s: health.perS,
    health_p99_ms: +health.p99.toFixed(2),
    submit_request_without_queue_object_per_s: (await rate(refused)).perS,
    queue_object_call_per_s: (await rate(() => call('GET', `/v1/ns/${ns}/queues/q/stats`))).perS,
  };
  // Warm every connection (and the queue object) before the clock starts.
  await Promise.all(Array.from({ length: C }, (_, i) => submit('warm', `w${i}`)));
  // The queue object's own counts: D1 batches and the rows D1 says they read and wrote.
  type Stats = { batches: number; plans: number; read: number; written: number; calls: number };
  const stats = async () => (await call('GET', `/v1/ns/${ns}/queues/q/stats`)) as Stats;
  await submit('q', 'first');
  const s0 = await stats();

  const lat: number[] = [];
  let next = 0;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: C }, async () => {
      for (let i = next++; i < N; i = next++) {
        const s = performance.now();
        await submit('q', `j${i}`);
        lat.push(performance.now() - s);
      }
    }),
  );
  const secs = (performance.now() - t0) / 1000;
  const s1 = await stats();
  const queued = ((await call('GET', `/v1/ns/${ns}/queues/q/count`)) as { count: number }).count - 1;
  lat.sort((a, b) => a - b);
  const r2 = (x: number) => +x.toFixed(2);
  console.log(
    JSON.stringify({
      system: 'lakeshore-edge',
      tokens: 'scoped: one producer token',
      mode: 'fan-in',
      connections: C,
      n: N,
      d1_delay_ms: DELAY,
      submits_per_s: Math.round(N / secs),
      latency_ms: { p50: r2(pct(lat, 50)), p90: r2(pct(lat, 90)), p99: r2(pct(lat, 99)), max: r2(lat[lat.length - 1]!) },
      latency_d1_round_trips: {
        unit_ms: r2(d1Rtt),
        p50: r2(pct(lat, 50) / d1Rtt),
        p99: r2(pct(lat, 99) / d1Rtt),
        health_p99: r2(health.p99 / d1Rtt),
      },
      submits_per_d1_batch: r2(N / Math.max(1, s1.batches - s0.batches)),
      submits_per_queue_object_call: r2(N / Math.max(1, s1.calls - s0.calls)),
      d1_rows_per_submit: { read: r2((s1.read - s0.read) / N), written: r2((s1.written - s0.written) / N) },
      ceilings,
      exactly_once: queued === N,
    }),
  );
} finally {
  await pool.close();
  await plane.stop();
  rmSync(dir, { recursive: true, force: true });
}
