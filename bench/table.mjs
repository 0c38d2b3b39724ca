// Markdown tables from JSON lines of the common format: lakeshore's (`npm run bench`) and the
// peers' (`../shared/peers/bench.sh`, results/<stamp>/raw.jsonl), medians over runs per case.
//   node bench/table.mjs lakeshore.jsonl peers-raw.jsonl > table.md
import { readFileSync } from 'node:fs';

const all = process.argv
  .slice(2)
  .flatMap((f) =>
    readFileSync(f, 'utf8')
      .split('\n')
      .filter(Boolean)
      .flatMap((l) => {
        try {
          return [JSON.parse(l)];
        } catch {
          return [];
        }
      }),
  )
  .filter((r) => r.label && !r.fatal && !r.bench);
const rows = all.filter((r) => r.mode === 'throughput' || r.mode === 'idle');

const median = (xs) => {
  const v = xs.filter((x) => typeof x === 'number' && Number.isFinite(x)).sort((a, b) => a - b);
  if (!v.length) return null;
  const m = v.length >> 1;
  return v.length % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
};
const f = (x, d = 0) => (x === null ? '—' : Number(x).toLocaleString('en-US', { minimumFractionDigits: d, maximumFractionDigits: d }));
const groups = new Map();
for (const r of rows) {
  const k = `${r.system}\u0000${r.label}`;
  if (!groups.has(k)) groups.set(k, []);
  groups.get(k).push(r);
}
const order = (r) => [r.mode === 'idle' ? 2 : r.enqueue === 'bulk' ? 1 : 0, r.system.startsWith('lakeshore') ? 0 : 1];
const sorted = [...groups.values()].sort((a, b) => {
  const [x, y] = [order(a[0]), order(b[0])];
  return x[0] - y[0] || x[1] - y[1] || a[0].system.localeCompare(b[0].system);
});
// Against the best peer of the same sitting and case (single or bulk enqueue, idle): for
// throughput, lakeshore's median jobs/s over the best peer's (above 1: ahead); for idle, its p50
// latency over the best peer's (below 1: ahead). A peer's row says which peer is the best.
const caseOf = (r) => (r.mode === 'idle' ? 'idle' : r.enqueue);
const isPeer = (r) => !r.system.startsWith('lakeshore');
const best = new Map();
for (const g of groups.values()) {
  const r0 = g[0];
  if (!isPeer(r0) || r0.d1_delay_ms) continue;
  const v = r0.mode === 'idle' ? median(g.map((r) => r.latency_ms?.p50)) : median(g.map((r) => r.throughput_jobs_per_s));
  const cur = best.get(caseOf(r0));
  if (v !== null && (!cur || (r0.mode === 'idle' ? v < cur.v : v > cur.v))) best.set(caseOf(r0), { v, system: r0.system });
}
const versus = (g) => {
  const r0 = g[0];
  const b = best.get(caseOf(r0));
  if (!b) return '—';
  if (isPeer(r0)) return r0.system === b.system ? 'best peer' : '';
  const v = r0.mode === 'idle' ? median(g.map((r) => r.latency_ms?.p50)) : median(g.map((r) => r.throughput_jobs_per_s));
  return v === null ? '—' : `${f(v / b.v, 2)}× ${b.system}${r0.mode === 'idle' ? ' (latency)' : ''}`;
};
// lakeshore's runs carry CPU per job by process (bench/workload.ts): a sitting's speed and its cost
// apart, since the cost moves far less with the machine's hour.
const cpuOf = (g) => {
  const m = (k) => median(g.map((r) => r.cpu_us_per_job?.[k]));
  const [plane, producers, worker] = [m('plane'), m('producers'), m('worker')];
  return producers === null ? '—' : `${plane === null ? '—' : f(plane)} / ${f(producers)} / ${f(worker)}`;
};
const out = [
  '| system | case | runs | jobs/s (median [min–max]) | enqueue→start p50 / p99 ms | vs best peer | CPU µs/job: plane / producers / worker | D1 queries/job (token checks) | exactly once |',
  '|---|---|---|---|---|---|---|---|---|',
];
for (const g of sorted) {
  const r0 = g[0];
  const t = g.map((r) => r.throughput_jobs_per_s).filter((x) => typeof x === 'number');
  const jobs = r0.mode === 'idle' ? '—' : `**${f(median(t))}** [${f(Math.min(...t))}–${f(Math.max(...t))}]`;
  const lat = `${f(median(g.map((r) => r.latency_ms?.p50)), r0.mode === 'idle' ? 2 : 0)} / ${f(median(g.map((r) => r.latency_ms?.p99)), r0.mode === 'idle' ? 2 : 0)}`;
  const pushed =
    r0.consumer === 'push'
      ? `, pushed (${r0.worker?.push_concurrency} at once${(r0.worker?.push_batch ?? 1) > 1 ? `, batches of ${r0.worker.push_batch}` : ''})`
      : '';
  const what =
    r0.mode === 'idle'
      ? `idle${pushed}`
      : `${r0.enqueue}${r0.batch ? ` (${r0.batch})` : ''}${r0.d1_delay_ms ? `, D1 +${r0.d1_delay_ms} ms` : ''}${r0.feed_listener ? ((r0.feed_readers ?? 1) > 1 ? `, ${r0.feed_readers} feed readers` : ', a feed reader') : ''}${pushed}`;
  const q = median(g.map((r) => r.d1?.queries_per_job));
  const queries = q === null ? '—' : `${f(q, 3)} (${f(median(g.map((r) => r.d1?.token_checks_per_job)), 4)})`;
  out.push(
    `| ${r0.system} | ${what} | ${g.length} | ${jobs} | ${lat} | ${versus(g)} | ${cpuOf(g)} | ${queries} | ${g.filter((r) => r.exactly_once).length}/${g.length} |`,
  );
}
// Fan-in (bench/fan-in.ts): submits from C independent connections, no worker.
const fan = new Map();
for (const r of all.filter((x) => x.mode === 'fan-in')) {
  const k = `${r.connections}\u0000${r.d1_delay_ms}`;
  if (!fan.has(k)) fan.set(k, []);
  fan.get(k).push(r);
}
if (fan.size) {
  out.push(
    '',
    '| fan-in | runs | submits/s (median [min–max]) | p50 / p99 ms | p50 / p99 in D1 round trips | submits per D1 batch | ceilings: /health, a submit request without the queue object, a queue-object call (req/s) | exactly once |',
    '|---|---|---|---|---|---|---|---|',
  );
  for (const g of fan.values()) {
    const r0 = g[0];
    const t = g.map((r) => r.submits_per_s);
    const m = (get, d = 0) => f(median(g.map(get)), d);
    out.push(
      `| ${r0.connections} connections${r0.d1_delay_ms ? `, D1 +${r0.d1_delay_ms} ms` : ''} | ${g.length} | **${f(median(t))}** [${f(Math.min(...t))}–${f(Math.max(...t))}] | ${m((r) => r.latency_ms.p50, 1)} / ${m((r) => r.latency_ms.p99)} | ${m((r) => r.latency_d1_round_trips.p50, 1)} / ${m((r) => r.latency_d1_round_trips.p99, 1)} | ${m((r) => r.submits_per_d1_batch, 1)} | ${m((r) => r.ceilings.health_per_s)}, ${r0.ceilings.submit_request_without_queue_object_per_s === undefined ? '–' : m((r) => r.ceilings.submit_request_without_queue_object_per_s)}, ${m((r) => r.ceilings.queue_object_call_per_s)} | ${g.filter((r) => r.exactly_once).length}/${g.length} |`,
    );
  }
}
// Against the performance issue's targets: each ratio from the medians of the sitting, and, where
// bench/side-by-side.sh interleaved the systems' rounds, the same ratio round by round (run k of
// one system beside run k of the other, minutes apart), which says how much of it is the hour.
const edge = (label) => all.filter((r) => r.system === 'lakeshore-edge' && r.label === label);
const jobs = (r) => r.throughput_jobs_per_s;
const bestOf = (kind) => {
  const b = best.get(kind);
  return b ? rows.filter((r) => r.system === b.system && isPeer(r) && caseOf(r) === kind && !r.d1_delay_ms) : [];
};
const pgSingle = rows.filter((r) => isPeer(r) && /pg-?boss/.test(r.system) && r.mode === 'throughput' && r.enqueue === 'single');
const ceiling = all.filter((r) => r.mode === 'ceiling' && r.enqueue_only);
const ratio = (a, b, get, getB = get) => {
  const [x, y] = [median(a.map(get)), median(b.map(getB))];
  return x === null || y === null ? null : x / y;
};
const perRound = (a, b, get, getB = get) => {
  const pairs = a
    .filter((r) => r.rep !== undefined)
    .map((r) => [get(r), b.find((q) => q.rep === r.rep)])
    .filter(([x, q]) => typeof x === 'number' && q && typeof getB(q) === 'number');
  return pairs.length > 1 ? pairs.map(([x, q]) => f(x / getB(q), 2)).join(', ') : '';
};
// Each target: [what, the sitting's value, its goal, '≥' or '≤', how to print a value, figures, round by round].
const targets = [];
const times = (x) => `${f(x, 2)}×`;
const share = (x) => `${f(x * 100)} %`;
const bulk = edge('edge-bulk');
if (bulk.length && best.get('bulk'))
  targets.push([
    'edge bulk against the best peer',
    ratio(bulk, bestOf('bulk'), jobs),
    1.2,
    '≥',
    times,
    `${f(median(bulk.map(jobs)))} / ${f(best.get('bulk').v)} ${best.get('bulk').system}`,
    perRound(bulk, bestOf('bulk'), jobs),
  ]);
const single = edge('edge-single');
if (single.length && pgSingle.length)
  targets.push([
    'edge single against pg-boss `send`',
    ratio(single, pgSingle, jobs),
    1,
    '≥',
    times,
    `${f(median(single.map(jobs)))} / ${f(median(pgSingle.map(jobs)))}`,
    perRound(single, pgSingle, jobs),
  ]);
if (single.length && ceiling.length) {
  const ceil = (r) => r.enqueue_only.jobs_per_s;
  const [cs, cc] = [median(single.map((r) => r.cpu_us_per_job?.plane)), median(ceiling.map((r) => r.enqueue_only.cpu_us_per_job?.plane))];
  const cpu = cs !== null && cc !== null ? `; the plane's CPU a job ${f(cs)} µs against ${f(cc)} with no worker` : '';
  targets.push([
    'edge single against 8 single-submit loops with no worker',
    ratio(single, ceiling, jobs, ceil),
    0.75,
    '≥',
    share,
    `${f(median(single.map(jobs)))} / ${f(median(ceiling.map(ceil)))}${cpu}`,
    perRound(single, ceiling, jobs, ceil),
  ]);
}
const far = edge('edge-bulk-d1-20ms');
const d1Alone = all.filter((r) => r.mode === 'd1-ceiling');
if (far.length)
  targets.push([
    'edge bulk with D1 +20 ms, jobs/s',
    median(far.map(jobs)),
    10_000,
    '≥',
    (x) => f(x),
    d1Alone.length ? `D1 alone, with no delay, ${f(median(d1Alone.map((r) => r.jobs_per_s)))}` : '',
    '',
  ]);
const idle = edge('edge-idle');
const bestIdle = bestOf('idle');
if (idle.length && bestIdle.length) {
  const p50 = (r) => r.latency_ms?.p50;
  const rtt = median(idle.map((r) => r.submit_rtt_ms?.p50));
  targets.push([
    `edge idle p50 against ${best.get('idle').system}'s`,
    ratio(idle, bestIdle, p50),
    2,
    '≤',
    times,
    `${f(median(idle.map(p50)), 2)} / ${f(median(bestIdle.map(p50)), 2)} ms${rtt === null ? '' : `; the submit's own round trip ${f(rtt, 2)} ms`}${
      idle[0].paced_rtt_ms
        ? `; at the same pace, /health ${f(median(idle.map((r) => r.paced_rtt_ms.health)), 2)} ms, a queue-object call with no D1 ${f(median(idle.map((r) => r.paced_rtt_ms.queue_object)), 2)} ms, and the queue object's D1 batch ${f(median(idle.map((r) => r.d1?.ms_per_batch)), 2)} ms`
        : ''
    }`,
    perRound(idle, bestIdle, p50),
  ]);
}
// Observers: edge bulk with 1 and with 10 feed readers (their own process) against none, same sitting.
for (const [label, readers] of [
  ['edge-bulk-listened', 1],
  ['edge-bulk-listened-10', 10],
]) {
  const g = edge(label);
  const cpu = (rs) => median(rs.map((r) => r.cpu_us_per_job?.plane));
  if (g.length && bulk.length)
    targets.push([
      `edge bulk with ${readers} feed reader${readers > 1 ? 's' : ''} against none, jobs/s`,
      ratio(g, bulk, jobs),
      0.9,
      '≥',
      share,
      `${f(median(g.map(jobs)))} / ${f(median(bulk.map(jobs)))}; the plane's CPU a job ${f(cpu(g))} against ${f(cpu(bulk))} µs${
        g[0].feed_readers_cpu_us_per_job === undefined
          ? ''
          : `, the readers' own process ${f(median(g.map((r) => r.feed_readers_cpu_us_per_job)))} µs (on the same 2 cores)`
      }; ${(() => {
        const t = median(g.map((r) => r.feed_caught_up_ms));
        const gapped = g.filter((r) => (r.feed_gaps ?? []).some((n) => n > 0)).length;
        if (t !== null) return `the slowest reader had every record ${f(t)} ms after the drain`;
        return gapped
          ? `in ${gapped} of ${g.length} runs a reader fell more than 4 MB behind, was cut and told of a gap (the readers' process shares the 2 cores)`
          : 'a reader lacked records 10 s after the drain';
      })()}`,
      perRound(g, bulk, jobs),
    ]);
}
// Push delivery (bench/workload.ts --consumer=push) against the pull worker in the same sitting.
const pushed = edge('edge-push');
if (pushed.length && bulk.length)
  targets.push([
    'edge push against edge pull (bulk), jobs/s',
    ratio(pushed, bulk, jobs),
    0.8,
    '≥',
    share,
    `${f(median(pushed.map(jobs)))} / ${f(median(bulk.map(jobs)))} at ${pushed[0].worker?.push_concurrency ?? '?'} deliveries at once` +
      `${(pushed[0].worker?.push_batch ?? 1) > 1 ? ` of up to ${pushed[0].worker.push_batch} jobs` : ''}`,
    perRound(pushed, bulk, jobs),
  ]);
const pushedIdle = edge('edge-push-idle');
if (pushedIdle.length && idle.length) {
  const p50 = (r) => r.latency_ms?.p50;
  targets.push([
    'edge push idle p50 against edge pull idle p50',
    ratio(pushedIdle, idle, p50),
    1,
    '≤',
    times,
    `${f(median(pushedIdle.map(p50)), 2)} / ${f(median(idle.map(p50)), 2)} ms`,
    perRound(pushedIdle, idle, p50),
  ]);
}
for (const [delay, goal] of [
  [0, 15_000],
  [20, 10_000],
]) {
  const g = all.filter((r) => r.mode === 'fan-in' && (r.d1_delay_ms ?? 0) === delay);
  const refused = median(g.map((r) => r.ceilings?.submit_request_without_queue_object_per_s));
  if (g.length)
    targets.push([
      `fan-in, 256 connections${delay ? `, D1 +${delay} ms` : ''}, submits/s`,
      median(g.map((r) => r.submits_per_s)),
      goal,
      '≥',
      (x) => f(x),
      refused === null ? '' : `a submit request refused before the queue object: ${f(refused)}/s`,
      '',
    ]);
  // The tail in D1 round trips (issue 42): the simulated D1 delay, else the measured idle round trip
  // of a route that reads D1 once (1-2 ms here, so at 256 connections Little's law alone puts the mean past 20).
  const p99 = median(g.map((r) => r.latency_d1_round_trips?.p99));
  if (g.length && p99 !== null)
    targets.push([
      `fan-in, 256 connections${delay ? `, D1 +${delay} ms` : ''}, p99 in D1 round trips`,
      p99,
      20,
      '≤',
      (x) => f(x, 1),
      `p99 ${f(median(g.map((r) => r.latency_ms?.p99)))} ms, a round trip ${f(median(g.map((r) => r.latency_d1_round_trips?.unit_ms)), 2)} ms${
        g[0].ceilings?.health_p99_ms === undefined
          ? ''
          : `; the runtime's own /health p99 over the same connections: ${f(median(g.map((r) => r.ceilings.health_p99_ms)))} ms (${f(median(g.map((r) => r.latency_d1_round_trips.health_p99)), 1)} round trips)`
      }`,
      '',
    ]);
}
const rowsRead = median(bulk.map((r) => r.d1?.rows_read_per_job));
if (rowsRead !== null) targets.push(['D1 rows read per job (bulk)', rowsRead, 10, '≤', (x) => f(x, 2), '', '']);
// Shard scaling (bench/shards.ts): a simulation of D1's single writer, one run at 1 shard and one at 4.
const scaling = all.filter((r) => r.case === 'shard-scaling (simulated D1 single writer)');
const at = (n) => scaling.find((r) => r.shards === n);
if (at(1) && at(4))
  targets.push([
    'shard scaling, 4 shards against 1 (SIMULATED D1 single writer)',
    at(4).jobs_per_s / at(1).jobs_per_s,
    3,
    '≥',
    times,
    `${f(at(4).jobs_per_s)} / ${f(at(1).jobs_per_s)} jobs/s at ${at(1).service_ms} ms a query; D1 queries per job ${at(1).d1_queries_per_job} / ${at(4).d1_queries_per_job}, of them the home database's ${at(1).home_queries_per_job} / ${at(4).home_queries_per_job}`,
    '',
  ]);
if (targets.length) {
  out.push('', '| target | this sitting | goal | met | figures (medians) | round by round |', '|---|---|---|---|---|---|');
  for (const [what, x, goal, op, show, figures, rounds] of targets) {
    const met = x !== null && (op === '≥' ? x >= goal : x <= goal);
    out.push(
      `| ${what} | ${x === null ? '—' : show(x)} | ${op} ${show(goal)} | ${x === null ? '—' : met ? 'yes' : 'no'} | ${figures} | ${rounds} |`,
    );
  }
}
console.log(out.join('\n'));
