/**
 * What a D1 batch costs the workerd process, by what it holds: on local D1 (Miniflare's
 * simulator, the one the edge benchmarks run on), cycles of the core's own plans (a submit of S
 * jobs, a claim of them, their ack) each in a batch of its own, beside batches of `SELECT 1`,
 * one statement and three. Prints, per form, the wall time of each batch (inside the Worker) and
 * the CPU time of the whole process tree per cycle (from /proc), 3 rounds of 300 cycles, forms
 * alternating. What it answers: how much of a batch is its fixed cost, how much its statements
 * and their rows, and what each statement's RETURNING adds (the "no RETURNING" forms are not
 * usable plans: they only price the RETURNING).
 *
 *   node scripts/run.mjs node bench/d1-batch-cost.ts [--size=13] [--forms=plan,select1,select3]
 *
 * Forms: plan (submit, claim, ack, as the queue object builds them), submit-noret, claim-noret,
 * ack-noret (that statement without its RETURNING), select1, select3 (batches of SELECT 1 only).
 */
import { d1Worker } from './d1-worker.ts';
import { treeCpuMs } from './cpu.ts';

const WORKER = `
import { submitPlan } from './src/core/sql/submit.ts';
import { claimPlan } from './src/core/claims.ts';
import { ackPlan } from './src/core/sql/ack.ts';
import { encodeEnvelope } from './client/envelope.ts';
const HINTS = { lease: null, due: null, ttl: null, paused: false, capped: false, rated: false };
const LIMITS = { defaultLeaseMs: 30000, defaultMaxAttempts: 3 };
const item = (id) => ({ id, envelope: encodeEnvelope({ fn: 'noop', args: [id, 'x'.repeat(100)] }), key: null, priority: 0, parent: null, runAt: null, expiresAt: null, maxAttempts: null });
const bare = (s) => ({ ...s, sql: s.sql.replace(/RETURNING[\\s\\S]*$/, '') });
export default {
  async fetch(req, env) {
    const u = new URL(req.url);
    const form = u.searchParams.get('form'), ns = u.searchParams.get('ns'), S = Number(u.searchParams.get('size')), K = Number(u.searchParams.get('cycles'));
    const run = (stmts) => env.DB.batch(stmts.map((s) => env.DB.prepare(s.sql).bind(...(s.args ?? []))));
    const us = { submit: 0, claim: 0, ack: 0, select: 0 };
    let n = 0;
    const timed = async (k, f) => { const t0 = performance.now(); const out = await f(); us[k] += performance.now() - t0; return out; };
    for (let k = 0; k < K; k++) {
      if (form === 'select1' || form === 'select3') {
        await timed('select', () => run(Array.from({ length: form === 'select1' ? 1 : 3 }, () => ({ sql: 'SELECT 1' }))));
        continue;
      }
      const now = Date.now();
      const jobs = Array.from({ length: S }, () => item('j' + n++));
      const submit = submitPlan(now, ns, 'q', jobs).stmts;
      await timed('submit', () => run(form === 'submit-noret' ? submit.map(bare) : submit));
      const claim = claimPlan({ now, ns, queue: 'q', limits: LIMITS, random: Math.random, sampled: new Set() }, { workerId: 'w', kind: 'fifo', leaseMs: null, temperature: 0 }, S, false, HINTS).stmts;
      const c = await timed('claim', () => run(form === 'claim-noret' ? claim.map(bare) : claim));
      // Without its RETURNING the claim answers no rows: the jobs it took are the ones just submitted (fifo, an empty queue before).
      const claimed = form === 'claim-noret' ? jobs.map((j) => ({ id: j.id, attempt: 1 })) : c[0].results;
      if (claimed.length !== S) throw new Error('claimed ' + claimed.length + ' of ' + S);
      const ack = ackPlan(now, ns, claimed.map((r) => ({ id: r.id, queue: 'q', holder: { workerId: 'w', attempt: r.attempt }, result: new TextEncoder().encode('null') }))).stmts;
      await timed('ack', () => run(form === 'ack-noret' ? ack.map(bare) : ack));
    }
    for (const k in us) us[k] = Math.round((us[k] / K) * 1000);
    return Response.json(us);
  },
};`;

const arg = (k: string, d: string) => process.argv.find((a) => a.startsWith(`--${k}=`))?.slice(k.length + 3) ?? d;
const SIZE = Number(arg('size', '13'));
const FORMS = arg('forms', 'plan,select1,select3').split(',');
const CYCLES = 300;
const { mf, dispose } = await d1Worker('d1-batch-cost', WORKER);
try {
  let i = 0;
  for (let round = 1; round <= 3; round++) {
    for (const form of FORMS) {
      const c0 = treeCpuMs(process.pid)!;
      const res = await mf.dispatchFetch(`http://d1/cycle?form=${form}&ns=n${i++}&size=${SIZE}&cycles=${CYCLES}`);
      if (!res.ok) throw new Error(await res.text());
      const wall = (await res.json()) as Record<string, number>;
      const cpu = Math.round(((treeCpuMs(process.pid)! - c0) / CYCLES) * 1000);
      console.log(
        JSON.stringify({
          round,
          form,
          size: SIZE,
          batch_wall_us: Object.fromEntries(Object.entries(wall).filter(([, v]) => v > 0)),
          cpu_us_per_cycle: cpu,
        }),
      );
    }
  }
} finally {
  await dispose();
}
