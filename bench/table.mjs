// Markdown tables from JSON lines of the common format: lakeshore's (`npm run bench`) and the
// peers' (`../shared/peers/bench.sh`, results/<stamp>/raw.jsonl), medians over runs per case.
//   node bench/table.mjs lakeshore.jsonl peers-raw.jsonl > table.md
import { readFileSync } from 'node:fs';

const all = process.argv.slice(2).flatMap((f) => readFileSync(f, 'utf8').split('\n').filter(Boolean).flatMap((l) => {
  try { return [JSON.parse(l)]; } catch { return []; }
})).filter((r) => r.label && !r.fatal && !r.bench);
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
const out = ['| system | case | runs | jobs/s (median [min–max]) | enqueue→start p50 / p99 ms | vs best peer | CPU µs/job: plane / producers / worker | exactly once |', '|---|---|---|---|---|---|---|---|'];
for (const g of sorted) {
  const r0 = g[0];
  const t = g.map((r) => r.throughput_jobs_per_s).filter((x) => typeof x === 'number');
  const jobs = r0.mode === 'idle' ? '—' : `**${f(median(t))}** [${f(Math.min(...t))}–${f(Math.max(...t))}]`;
  const lat = `${f(median(g.map((r) => r.latency_ms?.p50)), r0.mode === 'idle' ? 2 : 0)} / ${f(median(g.map((r) => r.latency_ms?.p99)), r0.mode === 'idle' ? 2 : 0)}`;
  const what = r0.mode === 'idle' ? 'idle' : `${r0.enqueue}${r0.batch ? ` (${r0.batch})` : ''}${r0.d1_delay_ms ? `, D1 +${r0.d1_delay_ms} ms` : ''}${r0.feed_listener ? ', a feed listener' : ''}`;
  out.push(`| ${r0.system} | ${what} | ${g.length} | ${jobs} | ${lat} | ${versus(g)} | ${cpuOf(g)} | ${g.filter((r) => r.exactly_once).length}/${g.length} |`);
}
// Fan-in (bench/fan-in.ts): submits from C independent connections, no worker.
const fan = new Map();
for (const r of all.filter((x) => x.mode === 'fan-in')) {
  const k = `${r.connections}\u0000${r.d1_delay_ms}`;
  if (!fan.has(k)) fan.set(k, []);
  fan.get(k).push(r);
}
if (fan.size) {
  out.push('', '| fan-in | runs | submits/s (median [min–max]) | p50 / p99 ms | p50 / p99 in D1 round trips | submits per D1 batch | ceilings: /health, a submit request without the queue object, a queue-object call (req/s) | exactly once |', '|---|---|---|---|---|---|---|---|');
  for (const g of fan.values()) {
    const r0 = g[0];
    const t = g.map((r) => r.submits_per_s);
    const m = (get, d = 0) => f(median(g.map(get)), d);
    out.push(`| ${r0.connections} connections${r0.d1_delay_ms ? `, D1 +${r0.d1_delay_ms} ms` : ''} | ${g.length} | **${f(median(t))}** [${f(Math.min(...t))}–${f(Math.max(...t))}] | ${m((r) => r.latency_ms.p50, 1)} / ${m((r) => r.latency_ms.p99)} | ${m((r) => r.latency_d1_round_trips.p50, 1)} / ${m((r) => r.latency_d1_round_trips.p99, 1)} | ${m((r) => r.submits_per_d1_batch, 1)} | ${m((r) => r.ceilings.health_per_s)}, ${r0.ceilings.submit_request_without_queue_object_per_s === undefined ? '–' : m((r) => r.ceilings.submit_request_without_queue_object_per_s)}, ${m((r) => r.ceilings.queue_object_call_per_s)} | ${g.filter((r) => r.exactly_once).length}/${g.length} |`);
  }
}
console.log(out.join('\n'));
