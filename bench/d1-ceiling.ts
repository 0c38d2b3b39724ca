/**
 * The ceiling D1 alone puts on the edge plane here: a small Worker, bundled with the core's own
 * plans, runs cycles of submit → claim → ack of B jobs straight on local D1 (one D1 batch each,
 * one after another, nothing else in the workerd process: no HTTP, no queue object, no worker
 * process). What the bench's edge cases do beyond this runs on the same workerd thread, so they
 * cannot pass it. Prints one JSON line per batch size: jobs/s (median of R runs) and the D1 ms
 * per job.
 *
 *   node scripts/run.mjs node bench/d1-ceiling.ts [--n=20000] [--batch=100,200] [--runs=3] [--payload=100]
 */
import { d1Worker } from './d1-worker.ts';

const arg = (k: string, d: string) => process.argv.find((a) => a.startsWith(`--${k}=`))?.slice(k.length + 3) ?? d;
const N = Number(arg('n', '20000'));
const RUNS = Number(arg('runs', '3'));
const PAYLOAD = Number(arg('payload', '100'));
const BATCHES = arg('batch', '100,200').split(',').map(Number);

// The Worker: the same statement plans the queue object runs, with the hints a queue object has
// for a plain queue (nothing paused, capped, rated, delayed or leased yet).
const WORKER = `
import { submitPlan } from './src/core/sql/submit.ts';
import { claimPlan } from './src/core/claims.ts';
import { ackPlan } from './src/core/sql/ack.ts';
import { encodeEnvelope } from './client/envelope.ts';
const HINTS = { lease: null, due: null, ttl: null, paused: false, capped: false, rated: false };
const LIMITS = { defaultLeaseMs: 30000, defaultMaxAttempts: 3 };
export default {
  async fetch(req, env) {
    const u = new URL(req.url);
    const n = Number(u.searchParams.get('n')), batch = Number(u.searchParams.get('batch')), pad = 'x'.repeat(Number(u.searchParams.get('payload')));
    const ns = u.searchParams.get('ns'), queue = 'q';
    // A plan's statements in one D1 batch, answered as the queue object's port answers them (plan.done).
    const run = async (plan) => {
      const rs = await env.DB.batch(plan.stmts.map((s) => env.DB.prepare(s.sql).bind(...s.args)));
      return plan.done(rs.map((r) => ({ rows: r.results ?? [], changes: r.meta?.changes ?? 0, rowsRead: 0, rowsWritten: 0 })));
    };
    let id = 0;
    const workers = new Map(); // the workers registered so far (sql/workers.ts), as an engine keeps them
    const t0 = Date.now();
    for (let done = 0; done < n; done += batch) {
      const now = Date.now();
      const items = Array.from({ length: batch }, () => ({ id: 'j' + id++, envelope: encodeEnvelope({ fn: 'noop', args: [id, pad] }), key: null, priority: 0, parent: null, runAt: null, expiresAt: null, maxAttempts: null }));
      await run(submitPlan(now, ns, queue, items));
      const { claimed } = await run(claimPlan({ now, ns, queue, limits: LIMITS, random: Math.random, sampled: new Set(), workers }, { workerId: 'w', kind: 'fifo', leaseMs: null, temperature: 0 }, batch, false, HINTS));
      if (claimed.length !== batch) throw new Error('claimed ' + claimed.length + ' of ' + batch);
      await run(ackPlan(now, ns, claimed.map((c) => ({ id: c.id, queue, holder: { workerId: 'w', attempt: c.attempt }, result: new TextEncoder().encode('null') }))));
    }
    return Response.json({ ms: Date.now() - t0 });
  },
};`;

const { mf, dispose } = await d1Worker('d1-ceiling', WORKER);
try {
  let k = 0;
  for (const batch of BATCHES) {
    const rates: number[] = [];
    for (let r = 0; r < RUNS; r++) {
      const res = await mf.dispatchFetch(`http://d1/?n=${N}&batch=${batch}&payload=${PAYLOAD}&ns=n${k++}`);
      if (!res.ok) throw new Error(await res.text());
      const { ms } = (await res.json()) as { ms: number };
      rates.push(N / (ms / 1000));
    }
    const med = rates.sort((a, b) => a - b)[rates.length >> 1]!;
    console.log(
      JSON.stringify({
        system: 'lakeshore-edge',
        mode: 'd1-ceiling',
        batch,
        n: N,
        payload_bytes: PAYLOAD,
        runs: RUNS,
        jobs_per_s: Math.round(med),
        d1_us_per_job: +(1e6 / med).toFixed(1),
      }),
    );
  }
} finally {
  await dispose();
}
