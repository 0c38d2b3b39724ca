/**
 * D1 rows read per job, by the form of the cycle's statements: the plane's own (the core's plans)
 * beside leaner set-based forms and one statement per item, each run on local D1 (Miniflare's
 * workerd SQLite, which counts rows read as D1 bills them) over 100 rows among 2,000 queued.
 * What it answers: how far below the plane's 17 a set-based cycle can go on D1's counter.
 *
 *   node scripts/run.mjs node bench/rows-forms.ts [--time]
 *
 * --time: also times 200 submit batches of 100 (the plane's statement), alternating with and
 * without the level trigger, 3 runs each: what the trigger costs in time, not rows.
 *
 * Prints one JSON line per form: {step, form, statements, rows_read_per_job}. The lean forms are
 * not the plane's: each gives up something the plane needs from that one statement (a RETURNING
 * row per job, the per-item fence, the level counts), so using one costs statements elsewhere.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { d1Worker, ROOT } from './d1-worker.ts';

// The Worker runs statement lists in one D1 batch each and answers their rows read; /plan runs the
// core's own plans for a cycle of 100 (submit, claim, ack), as the queue object builds them.
const WORKER = `
import { submitPlan } from './src/core/sql/submit.ts';
import { claimPlan } from './src/core/claims.ts';
import { ackPlan } from './src/core/sql/ack.ts';
import { encodeEnvelope } from './client/envelope.ts';
const HINTS = { lease: null, due: null, ttl: null, paused: false, capped: false, rated: false };
const LIMITS = { defaultLeaseMs: 30000, defaultMaxAttempts: 3 };
const item = (id) => ({ id, envelope: encodeEnvelope({ fn: 'noop', args: [id, 'x'.repeat(100)] }), key: null, priority: 0, parent: null, runAt: null, expiresAt: null, maxAttempts: null });
export default {
  async fetch(req, env) {
    const u = new URL(req.url);
    const run = (stmts) => env.DB.batch(stmts.map((s) => env.DB.prepare(s.sql).bind(...(s.args ?? []))));
    const read = (rs) => rs.reduce((n, r) => n + r.meta.rows_read, 0);
    if (u.pathname === '/sql') return Response.json(read(await run(await req.json())));
    if (u.pathname === '/time') {
      const t0 = Date.now();
      for (let b = 0; b < Number(u.searchParams.get('batches')); b++) await run(submitPlan(Date.now(), u.searchParams.get('ns'), 'q', Array.from({ length: 100 }, (_, i) => item('t' + b + '_' + i))).stmts);
      return Response.json(Date.now() - t0);
    }
    const now = Date.now(), ns = u.searchParams.get('ns'), from = Number(u.searchParams.get('from')), n = Number(u.searchParams.get('n'));
    const items = Array.from({ length: n }, (_, i) => item((u.pathname === '/fill' ? 'f' : 'j') + (from + i)));
    const s = await run(submitPlan(now, ns, 'q', items).stmts);
    if (u.pathname === '/fill') return Response.json(0);
    const c = await run(claimPlan({ now, ns, queue: 'q', limits: LIMITS, random: Math.random, sampled: new Set() }, { workerId: 'w', kind: 'fifo', leaseMs: null, temperature: 0 }, n, false, HINTS).stmts);
    const claimed = c[0].results;
    if (claimed.length !== n) throw new Error('claimed ' + claimed.length + ' of ' + n);
    const a = await run(ackPlan(now, ns, claimed.map((r) => ({ id: r.id, queue: 'q', holder: { workerId: 'w', attempt: r.attempt }, result: new TextEncoder().encode('null') }))).stmts);
    return Response.json({ submit: read(s), claim: read(c), ack: read(a) });
  },
};`;

const N = 100;
const DEPTH = 2_000;
const { mf, dispose } = await d1Worker('rows-forms', WORKER);

type S = { sql: string; args?: unknown[] };
const call = async (path: string, body?: unknown) => {
  const res = await mf.dispatchFetch(`http://d1${path}`, body === undefined ? {} : { method: 'POST', body: JSON.stringify(body) });
  if (!res.ok) throw new Error(await res.text());
  return res.json() as Promise<any>;
};
const sql = (stmts: S[]) => call('/sql', stmts) as Promise<number>;
const print = (step: string, form: string, statements: string, read: number) =>
  console.log(JSON.stringify({ step, form, statements, rows_read_per_job: +(read / N).toFixed(2) }));

// Each namespace holds DEPTH queued rows (ids f1000000 on) before a form runs on the first N of them.
let k = 0;
const fresh = async () => {
  const ns = `n${k++}`;
  for (let at = 0; at < DEPTH; at += 500) await call(`/fill?ns=${ns}&from=${1e6 + at}&n=500`);
  return ns;
};
const now = Date.now();
const W = (ns: string) => `ns = '${ns}' AND queue = 'q' AND state = 'queued'`;
const CLAIM_SET = `SET state = 'running', attempt = attempt + 1, worker_id = 'w', started_at = ${now}, updated_at = ${now}, lease_until = ${now} + 30000`;
const CLAIM_RET = `RETURNING rid, id, queue, CASE typeof(envelope) WHEN 'text' THEN envelope END AS envelope_text,
  CASE typeof(envelope) WHEN 'text' THEN NULL ELSE hex(envelope) END AS envelope_hex, attempt, lease_until, priority`;
const pick = (ns: string) => `SELECT rid FROM invocations WHERE ${W(ns)} ORDER BY priority DESC, rid ASC LIMIT ${N}`;
// The range form: the rows up to the N-th in claim order, one index range (one priority level here).
const range = (ns: string) => `${W(ns)} AND priority = (SELECT max(priority) FROM invocations WHERE ${W(ns)})
  AND rid <= COALESCE((SELECT rid FROM invocations WHERE ${W(ns)} ORDER BY priority DESC, rid ASC LIMIT 1 OFFSET ${N - 1}), 9e18)`;
const claimIn = (ns: string, ret: boolean) => ({
  sql: `UPDATE invocations ${CLAIM_SET} WHERE rid IN (${pick(ns)}) AND state = 'queued' ${ret ? CLAIM_RET : ''}`,
});
const claimRange = (ns: string, ret: boolean) => ({ sql: `UPDATE invocations ${CLAIM_SET} WHERE ${range(ns)} ${ret ? CLAIM_RET : ''}` });
const ids = (from: number) => Array.from({ length: N }, (_, i) => `f${from + i}`);
const ackItems = (from: number) => JSON.stringify(ids(from).map((id) => [id, 'q', 'w', 1, '6e756c6c']));
const ACK_RET = `RETURNING invocations.id, invocations.queue, invocations.worker_id, invocations.attempt`;
const ackJoin = (ns: string, from: number, ret: boolean) => ({
  sql: `WITH m AS MATERIALIZED (SELECT i.rid AS rid, j.value AS v FROM json_each(?2) AS j CROSS JOIN invocations AS i WHERE i.ns = ?1 AND i.id = j.value->>0)
    UPDATE invocations SET state = 'succeeded', result = unhex(m.v->>4), lease_until = NULL, updated_at = ${now}, finished_at = ${now}
      FROM m WHERE invocations.rid = m.rid AND invocations.state = 'running' AND invocations.worker_id = m.v->>2
       AND (m.v->>1 IS NULL OR invocations.queue = m.v->>1) AND (m.v->>3 IS NULL OR invocations.attempt = m.v->>3) ${ret ? ACK_RET : ''}`,
  args: [ns, ackItems(from)],
});
// No per-item fence or result: every row held by worker w, the same result for all.
const ackIn = (ns: string, from: number, ret: boolean) => ({
  sql: `UPDATE invocations SET state = 'succeeded', result = X'6e756c6c', lease_until = NULL, updated_at = ${now}, finished_at = ${now}
    WHERE (ns, id) IN (SELECT ?1, value FROM json_each(?2)) AND state = 'running' AND worker_id = 'w' ${ret ? ACK_RET : ''}`,
  args: [ns, JSON.stringify(ids(from))],
});
const COLUMNS = `(ns, queue, id, key, priority, parent, envelope, state, attempt, created_at, updated_at, run_at, expires_at, max_attempts)`;
const submitItems = (from: number) =>
  JSON.stringify(Array.from({ length: N }, (_, i) => [`s${from + i}`, `{"fn":"noop","args":[${i},"${'x'.repeat(100)}"]}`]));
const insertSet = (ns: string, from: number, ret: boolean) => ({
  sql: `INSERT INTO invocations ${COLUMNS} SELECT ?1, 'q', value->>0, NULL, 0, NULL, value->>1, 'queued', 0, ${now}, ${now}, NULL, NULL, NULL
    FROM json_each(?2) WHERE true ON CONFLICT DO NOTHING ${ret ? 'RETURNING id, state, run_at, expires_at' : ''}`,
  args: [ns, submitItems(from)],
});

try {
  // The plane's own cycle (the figure test/edge/rules.test.ts holds) among DEPTH queued rows, after a first cycle to warm.
  const plane = await fresh();
  await call(`/cycle?ns=${plane}&from=0&n=${N}`);
  const own = await call(`/cycle?ns=${plane}&from=${N}&n=${N}`);
  print('submit', 'the plane: INSERT … SELECT FROM json_each … RETURNING (level trigger)', '1', own.submit);
  print('claim', 'the plane: UPDATE … WHERE rid IN (pick) RETURNING', '1', own.claim);
  print('ack', 'the plane: UPDATE … FROM (materialized json_each ⨝ (ns, id)) RETURNING', '1', own.ack);

  let ns = await fresh();
  print('claim', 'rid IN (pick), no RETURNING', '1', await sql([claimIn(ns, false)]));
  print('claim', 'index range up to the N-th row, RETURNING', '1', await sql([claimRange(ns, true)]));
  print('claim', 'index range up to the N-th row, no RETURNING', '1', await sql([claimRange(ns, false)]));
  ns = await fresh();
  await sql([claimIn(ns, false), claimIn(ns, false), claimIn(ns, false)]);
  print('ack', "the plane's form, no RETURNING", '1', await sql([ackJoin(ns, 1e6, false)]));
  print('ack', '(ns, id) IN json_each, no per-item fence or result, RETURNING', '1', await sql([ackIn(ns, 1e6 + N, true)]));
  print('ack', '(ns, id) IN json_each, no per-item fence or result, no RETURNING', '1', await sql([ackIn(ns, 1e6 + 2 * N, false)]));
  // One statement per item (what the set forms save the statements of).
  ns = await fresh();
  const one = Array.from({ length: N }, (_, _i) => ({
    sql: `UPDATE invocations ${CLAIM_SET} WHERE rid = (SELECT rid FROM invocations WHERE ${W(ns)} ORDER BY priority DESC, rid ASC LIMIT 1) AND state = 'queued' ${CLAIM_RET}`,
  }));
  print('claim', 'one statement per job', `${N}`, await sql(one));
  print(
    'ack',
    'one statement per job',
    `${N}`,
    await sql(
      ids(1e6).map((id) => ({
        sql: `UPDATE invocations SET state = 'succeeded', result = X'6e756c6c', lease_until = NULL, updated_at = ${now}, finished_at = ${now} WHERE ns = ?1 AND id = ?2 AND state = 'running' AND worker_id = 'w' AND attempt = 1 ${ACK_RET}`,
        args: [ns, id],
      })),
    ),
  );
  print(
    'submit',
    'one statement per job (level trigger)',
    `${N}`,
    await sql(
      Array.from({ length: N }, (_, i) => ({
        sql: `INSERT INTO invocations ${COLUMNS} VALUES (?1, 'q', ?2, NULL, 0, NULL, 'x', 'queued', 0, ${now}, ${now}, NULL, NULL, NULL) ON CONFLICT DO NOTHING RETURNING id, state, run_at, expires_at`,
        args: [ns, `o${i}`],
      })),
    ),
  );
  print('submit', 'INSERT … SELECT FROM json_each, no RETURNING (level trigger)', '1', await sql([insertSet(ns, 0, false)]));
  // Last: the level trigger dropped for good in this scratch database.
  await sql([{ sql: 'DROP TRIGGER invocations_levels_insert' }]);
  print('submit', 'INSERT … SELECT FROM json_each, RETURNING, no level trigger', '1', await sql([insertSet(ns, N, true)]));
  print('submit', 'INSERT … SELECT FROM json_each, no RETURNING, no level trigger', '1', await sql([insertSet(ns, 2 * N, false)]));
  if (process.argv.includes('--time')) {
    // The trigger as the migrations create it (the last migration that does).
    const migrations = join(ROOT, 'migrations');
    const last = readdirSync(migrations)
      .filter((f) => f.endsWith('.sql'))
      .sort()
      .reverse()
      .map((f) => /CREATE TRIGGER `invocations_levels_insert`[\s\S]*?END;/.exec(readFileSync(join(migrations, f), 'utf8'))?.[0])
      .find(Boolean);
    if (!last) throw new Error('no migration creates invocations_levels_insert');
    for (let r = 0; r < 6; r++) {
      const trigger = r % 2 === 0;
      if (trigger) await sql([{ sql: last }]);
      else await sql([{ sql: 'DROP TRIGGER invocations_levels_insert' }]);
      const ms = await call(`/time?ns=time${r}&batches=200`);
      console.log(
        JSON.stringify({ step: 'submit', form: trigger ? 'the plane (level trigger)' : 'without the level trigger', batches: 200, ms }),
      );
    }
  }
} finally {
  await dispose();
}
