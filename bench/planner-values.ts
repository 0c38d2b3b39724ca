/**
 * What it costs when SQLite's planner reads a bound value (src/core/port.ts, `stmt`): a
 * statement whose plan read one is compiled again each time it is bound. The core writes every
 * parameter `+?N`, which the planner does not look into; "bare" is the same statement with
 * `?N`, as it was written before. Two places, forms alternating, medians:
 *
 * - node:sqlite (the local plane; Node 22 ships SQLite 3.54): a worker's cycle on a file of
 *   20,000 queued jobs, each statement timed: a claim of 50 with its sweeps and wake read, then
 *   the ack of the 50 as one set, in a savepoint rolled back after (so every cycle sees the same rows).
 * - workerd's local D1 (the edge plane's SQLite): the same cycle as two D1 batches, as the queue
 *   object sends them (its hints leave the sweeps out), claims and acks landing, 20 cycles a round,
 *   forms alternating: the wall time of a cycle and the CPU of workerd's process tree.
 *
 *   node scripts/run.mjs node bench/planner-values.ts [--cycles=200]
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { Dispatch, encodeEnvelope } from '../client/local/index.ts';
import { claimPlan } from '../src/core/claims.ts';
import type { Stmt } from '../src/core/port.ts';
import { ackPlan } from '../src/core/sql/ack.ts';
import { DEFAULT_LIMITS } from '../src/core/limits.ts';
import { treeCpuMs } from './cpu.ts';
import { d1Worker } from './d1-worker.ts';

const arg = (k: string, d: string) => process.argv.find((a) => a.startsWith(`--${k}=`))?.slice(k.length + 3) ?? d;
const CYCLES = Number(arg('cycles', '200'));
const SET = 50;
const bare = (sql: string) => sql.replace(/\+\?(\d+)/g, '?$1');
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor((xs.length - 1) / 2)]!;
const HINTS = { lease: null, due: null, ttl: null, paused: false, capped: false, rated: false };
const LIMITS = DEFAULT_LIMITS;
const label = (sql: string) =>
  /attempt = attempt \+ 1/.test(sql)
    ? 'claim'
    : /SET state = 'queued', run_at = NULL/.test(sql)
      ? 'promote'
      : /'Expired'/.test(sql)
        ? 'ttl'
        : /AS lease,/.test(sql)
          ? 'wake'
          : /state = 'succeeded'/.test(sql)
            ? 'ack'
            : /lease_until <= /.test(sql)
              ? 'expire'
              : 'other';

// ---------------------------------------------------------------- node:sqlite
const dir = mkdtempSync(join(tmpdir(), 'lakeshore-planner-'));
try {
  const file = join(dir, 'd.sqlite');
  const d = new Dispatch(file, { namespace: 'bench' });
  for (let i = 0; i < 20_000; i += 1000)
    await d.submitMany(
      'q',
      Array.from({ length: 1000 }, (_, k) => ({
        envelope: encodeEnvelope({ fn: 'noop', args: [i + k, 'x'.repeat(80)] }),
        opts: { id: `j${i + k}` },
      })),
    );
  await d.close();
  const db = new DatabaseSync(file);
  const cache = new Map<string, ReturnType<DatabaseSync['prepare']>>();
  const run = (s: Stmt, form: 'opaque' | 'bare') => {
    const sql = form === 'bare' ? bare(s.sql) : s.sql;
    let st = cache.get(sql);
    if (!st) cache.set(sql, (st = db.prepare(sql)));
    return st.all(...(s.args as never[])) as Record<string, unknown>[];
  };
  const took: Record<string, Record<string, number[]>> = { opaque: {}, bare: {} };
  db.exec('BEGIN IMMEDIATE');
  for (let c = 0; c < 2 * CYCLES + 20; c++) {
    const form = c % 2 ? 'bare' : 'opaque';
    const now = Date.now();
    db.exec('SAVEPOINT cycle');
    const per: Record<string, number> = {};
    const timed = (s: Stmt) => {
      const t = performance.now();
      const rows = run(s, form);
      const k = label(s.sql);
      per[k] = (per[k] ?? 0) + (performance.now() - t) * 1000;
      return rows;
    };
    const plan = claimPlan(
      { now, ns: 'bench', queue: 'q', limits: LIMITS, random: Math.random, sampled: new Set(), workers: new Map() },
      { workerId: 'w', kind: 'fifo', leaseMs: null, temperature: 0 },
      SET,
      true,
      null, // the local plane keeps no hints (several processes write): the sweeps run in front of every claim
    );
    let claimed: Record<string, unknown>[] = [];
    for (const s of plan.stmts) {
      const rows = timed(s);
      if (label(s.sql) === 'claim') claimed = rows;
    }
    const acks = ackPlan(
      now,
      'bench',
      claimed.map((r) => ({ id: String(r.id), queue: 'q', holder: { workerId: 'w', attempt: Number(r.attempt) }, result: null })),
    );
    for (const s of acks.stmts) timed(s);
    db.exec('ROLLBACK TO cycle');
    db.exec('RELEASE cycle');
    if (claimed.length !== SET) throw new Error(`claimed ${claimed.length}`);
    if (c < 20) continue; // warm-up
    per.cycle = Object.values(per).reduce((a, b) => a + b, 0);
    for (const [k, v] of Object.entries(per)) (took[form]![k] ??= []).push(v);
  }
  db.exec('ROLLBACK');
  db.close();
  const sqliteVersion = String((new DatabaseSync(':memory:').prepare('SELECT sqlite_version() AS v').get() as { v: string }).v);
  for (const form of ['opaque', 'bare'] as const)
    console.log(
      JSON.stringify({
        where: 'node:sqlite',
        sqlite: sqliteVersion,
        form,
        cycle: `claim ${SET} with its sweeps and wake read, then their ack as a set`,
        us_median: Object.fromEntries(Object.entries(took[form]!).map(([k, v]) => [k, Math.round(median(v))])),
      }),
    );
} finally {
  rmSync(dir, { recursive: true, force: true });
}

// ---------------------------------------------------------------- workerd's local D1
const WORKER = `
import { submitPlan } from './src/core/sql/submit.ts';
import { claimPlan } from './src/core/claims.ts';
import { ackPlan } from './src/core/sql/ack.ts';
import { encodeEnvelope } from './client/envelope.ts';
const HINTS = ${JSON.stringify(HINTS)};
const LIMITS = ${JSON.stringify(LIMITS)};
const bare = (sql) => sql.replace(/\\+\\?(\\d+)/g, '?$1');
export default {
  async fetch(req, env) {
    const u = new URL(req.url);
    const form = u.searchParams.get('form'), ns = u.searchParams.get('ns'), K = Number(u.searchParams.get('cycles')), S = ${SET};
    const run = (stmts) => env.DB.batch(stmts.map((s) => env.DB.prepare(form === 'bare' ? bare(s.sql) : s.sql).bind(...s.args)));
    if (u.searchParams.has('alone')) {
      // One statement a hundred times in one batch, on a queue with nothing queued: what compiling it costs.
      const one = claimPlan({ now: Date.now(), ns, queue: 'empty', limits: LIMITS, random: Math.random, sampled: new Set(), workers: new Map() }, { workerId: 'w', kind: 'fifo', leaseMs: null, temperature: 0 }, S, false, HINTS).stmts.find((s) => /attempt = attempt/.test(s.sql));
      await run(Array.from({ length: 100 }, () => one));
      return Response.json({});
    }
    if (u.searchParams.has('setup')) {
    for (let i = 0; i < K * S; i += 100)
      await run(submitPlan(Date.now(), ns, 'q', Array.from({ length: 100 }, (_, k) => ({ id: 'j' + (i + k), envelope: encodeEnvelope({ fn: 'noop', args: [i + k, 'x'.repeat(80)] }), key: null, priority: 0, parent: null, runAt: null, expiresAt: null, maxAttempts: null }))).stmts);
      return Response.json({});
    }
    for (let k = 0; k < K; k++) {
      const now = Date.now();
      const plan = claimPlan({ now, ns, queue: 'q', limits: LIMITS, random: Math.random, sampled: new Set(), workers: new Map() }, { workerId: 'w', kind: 'fifo', leaseMs: null, temperature: 0 }, S, true, HINTS);
      const out = await run(plan.stmts);
      const rows = out.find((r) => r.results.length && 'attempt' in r.results[0])?.results ?? [];
      if (rows.length !== S) throw new Error('claimed ' + rows.length);
      const acks = ackPlan(now, ns, rows.map((r) => ({ id: r.id, queue: 'q', holder: { workerId: 'w', attempt: r.attempt }, result: null })));
      await run(acks.stmts);
    }
    return Response.json({});
  },
};`;
const { mf, dispose } = await d1Worker('planner-values', WORKER);
try {
  // workerd's clock inside a Worker moves only at I/O: each form's cycles are timed from here, and
  // the whole process tree's CPU (workerd runs the Worker and D1's SQLite) read from /proc.
  const out: Record<string, { wall: number[]; cpu: number[] }> = { opaque: { wall: [], cpu: [] }, bare: { wall: [], cpu: [] } };
  const K = 20;
  const rounds = Math.max(3, Math.round(CYCLES / K));
  for (let r = 0; r < rounds; r++)
    for (const form of ['opaque', 'bare'] as const) {
      const ns = `${form}${r}`;
      const setup = await mf.dispatchFetch(`http://d1/?form=${form}&ns=${ns}&cycles=${K}&setup=1`);
      if (!setup.ok) throw new Error(await setup.text());
      const c0 = treeCpuMs(process.pid)!;
      const t0 = performance.now();
      const res = await mf.dispatchFetch(`http://d1/?form=${form}&ns=${ns}&cycles=${K}`);
      if (!res.ok) throw new Error(await res.text());
      await res.arrayBuffer();
      out[form]!.wall.push(((performance.now() - t0) / K) * 1000);
      out[form]!.cpu.push(((treeCpuMs(process.pid)! - c0) / K) * 1000);
    }
  // The claim statement alone, 100 to a batch: D1's statement cost without its batch's.
  const alone: Record<string, number[]> = { opaque: [], bare: [] };
  for (let r = 0; r < 2 * rounds; r++)
    for (const form of ['opaque', 'bare'] as const) {
      const c0 = treeCpuMs(process.pid)!;
      const res = await mf.dispatchFetch(`http://d1/?form=${form}&ns=alone&cycles=1&alone=1`);
      if (!res.ok) throw new Error(await res.text());
      await res.arrayBuffer();
      alone[form]!.push(((treeCpuMs(process.pid)! - c0) / 100) * 1000);
    }
  for (const form of ['opaque', 'bare'] as const)
    console.log(
      JSON.stringify({
        where: "workerd's local D1",
        form,
        statement: 'a claim statement, 100 in one batch, nothing queued',
        cpu_us_median: Math.round(median(alone[form]!)),
      }),
    );
  for (const form of ['opaque', 'bare'] as const)
    console.log(
      JSON.stringify({
        where: "workerd's local D1",
        form,
        cycle: `claim ${SET} with its wake read (one batch, as the queue object sends it), then their ack as a set (one batch)`,
        rounds,
        us_median_per_cycle: { wall: Math.round(median(out[form]!.wall)), cpu: Math.round(median(out[form]!.cpu)) },
      }),
    );
} finally {
  await dispose();
}
