// `npm run bench`: the common workload on the local SQLite plane and the local edge plane, plus
// the journal, fan-out (1 and 1,000 readers of one job), simulated-distance, ceiling and memory measurements.
//   npm run bench                 3 runs of each case, N=20000 (long)
//   npm run bench -- --quick      one run of each case, N=2000
//   npm run bench -- edge-bulk    only the cases named
// Each run prints one JSON line (see bench/README.md); a summary of medians goes to stderr.
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { ROOT } from '../scripts/toolchain.mjs';

const quick = process.argv.includes('--quick');
const reps = quick ? 1 : Number(process.env.REPS ?? 3);
// bench/side-by-side.sh runs one round at a time between the peers' rounds and numbers them
const firstRep = Number(process.env.BENCH_REP ?? 1);
const n = quick ? 2000 : 20000;
const idle = `--idle-n=${quick ? 100 : 500}`;
const workload = (...args) => ['bench/workload.ts', ...args, `--n=${n}`];
const cases = [
  ['local-single', workload('--system=lakeshore-local', '--enqueue=single')],
  ['local-bulk', workload('--system=lakeshore-local', '--enqueue=bulk')],
  ['local-idle', workload('--system=lakeshore-local', '--mode=idle', idle)],
  ['edge-single', workload('--system=lakeshore-edge', '--enqueue=single')],
  // right after edge-single: single is held to a share of this ceiling, so the two run minutes apart, not ten
  ['edge-ceiling', ['bench/ceiling.ts', `--n=${quick ? 2000 : 8000}`]],
  ['edge-bulk', workload('--system=lakeshore-edge', '--enqueue=bulk')],
  ['edge-bulk-listened', workload('--system=lakeshore-edge', '--enqueue=bulk', '--listen=1')],
  ['edge-bulk-listened-10', workload('--system=lakeshore-edge', '--enqueue=bulk', '--listen=10')],
  ['edge-idle', workload('--system=lakeshore-edge', '--mode=idle', idle)],
  // push delivery beside pull: the same producers, the queue POSTs its jobs to a receiver that answers
  // at once, in batches of up to 50 (as the pull worker claims many at once); and one job a request
  ['edge-push', workload('--system=lakeshore-edge', '--enqueue=bulk', '--consumer=push', '--push-concurrency=16', '--push-batch=50')],
  ['edge-push-1', workload('--system=lakeshore-edge', '--enqueue=bulk', '--consumer=push', '--push-concurrency=64')],
  ['edge-push-idle', workload('--system=lakeshore-edge', '--mode=idle', idle, '--consumer=push', '--push-concurrency=64')],
  ['edge-bulk-d1-20ms', workload('--system=lakeshore-edge', '--enqueue=bulk', '--d1-delay-ms=20')],
  ['edge-journal', ['bench/journal.ts', '--system=lakeshore-edge', `--n=${quick ? 100 : 500}`]],
  ['edge-fanout-1', ['bench/fan-out.ts', '--readers=1', `--n=${quick ? 50 : 200}`]],
  ['edge-fanout-1000', ['bench/fan-out.ts', '--readers=1000', `--n=${quick ? 50 : 200}`]],
  ['local-memory', ['--expose-gc', 'bench/memory.ts']],
  ['edge-d1-ceiling', ['bench/d1-ceiling.ts', `--n=${n}`, '--batch=100', '--runs=1']],
  ['edge-fan-in', ['bench/fan-in.ts', `--n=${quick ? 4000 : 20000}`]],
  ['edge-fan-in-d1-20ms', ['bench/fan-in.ts', `--n=${quick ? 4000 : 20000}`, '--d1-delay-ms=20']],
];
const only = process.argv.slice(2).filter((a) => !a.startsWith('--'));
const rows = [];
for (let rep = 1; rep <= reps; rep++) {
  for (const [label, args] of cases) {
    if (only.length && !only.includes(label)) continue;
    process.stderr.write(`[bench] rep ${rep}: ${label}\n`);
    const r = spawnSync(
      process.execPath,
      ['--disable-warning=ExperimentalWarning', ...args.map((a) => (a.startsWith('bench/') ? join(ROOT, a) : a)), `--label=${label}`],
      {
        cwd: ROOT,
        encoding: 'utf8',
        stdio: ['ignore', 'pipe', 'inherit'],
        timeout: 15 * 60_000,
      },
    );
    const line = (r.stdout ?? '').trim().split('\n').pop();
    if (line) {
      const row = { ...JSON.parse(line), label, rep: firstRep + rep - 1 };
      process.stdout.write(`${JSON.stringify(row)}\n`);
      rows.push(row);
    } else process.stderr.write(`[bench] ${label} produced no result (exit ${r.status})\n`);
  }
}
const med = (xs) => {
  const s = xs.filter((x) => x != null).sort((a, b) => a - b);
  return s.length ? s[Math.floor((s.length - 1) / 2)] : null;
};
for (const label of [...new Set(rows.map((r) => r.label))]) {
  const rs = rows.filter((r) => r.label === label);
  const parts = [];
  if (rs[0].throughput_jobs_per_s !== undefined) parts.push(`jobs/s ${med(rs.map((r) => r.throughput_jobs_per_s))}`);
  if (rs[0].latency_ms && rs[0].mode !== 'fan-in')
    parts.push(`p50 ${med(rs.map((r) => r.latency_ms.p50))} ms`, `p99 ${med(rs.map((r) => r.latency_ms.p99))} ms`);
  if (rs[0].submit_rtt_ms) parts.push(`the submit's own round trip p50 ${med(rs.map((r) => r.submit_rtt_ms.p50))} ms`);
  if (rs[0].exactly_once !== undefined && rs[0].mode !== 'fan-in') parts.push(`exactly_once ${rs.every((r) => r.exactly_once)}`);
  if (rs[0].rss_mb) parts.push(`rss ${med(rs.map((r) => r.rss_mb.depth_10k))} -> ${med(rs.map((r) => r.rss_mb.depth_200k))} MB`);
  if (rs[0].enqueue_only) {
    const q = (k) => med(rs.map((r) => r.rtt_after_20ms_quiet_p50_ms?.[k]));
    parts.push(
      `enqueue-only single ${med(rs.map((r) => r.enqueue_only.jobs_per_s))} jobs/s, submit round trip ${med(rs.map((r) => r.rtt_p50_ms.submit))} ms (${q('submit')} after 20 ms quiet), D1 read ${med(rs.map((r) => r.rtt_p50_ms.d1_read))} ms (${q('d1_read')}), /health ${med(rs.map((r) => r.rtt_p50_ms.health))} ms (${q('health')})`,
    );
  }
  if (rs[0].mode === 'd1-ceiling')
    parts.push(
      `D1 alone, cycles of ${rs[0].batch}: jobs/s ${med(rs.map((r) => r.jobs_per_s))} (${med(rs.map((r) => r.d1_us_per_job))} µs a job)`,
    );
  if (rs[0].all_readers_ms)
    parts.push(
      `all ${rs[0].readers} readers p50 ${med(rs.map((r) => r.all_readers_ms.p50))} ms p99 ${med(rs.map((r) => r.all_readers_ms.p99))} ms`,
      `D1 rows read per append ${med(rs.map((r) => r.rows_read_per_append))}`,
    );
  if (rs[0].mode === 'fan-in') {
    const lat = (k) => med(rs.map((r) => r.latency_d1_round_trips[k]));
    parts.push(
      `${rs[0].connections} connections: submits/s ${med(rs.map((r) => r.submits_per_s))}, p50 ${med(rs.map((r) => r.latency_ms.p50))} ms (${lat('p50')} D1 round trips) p99 ${med(rs.map((r) => r.latency_ms.p99))} ms (${lat('p99')}), submits per D1 batch ${med(rs.map((r) => r.submits_per_d1_batch))}, ceilings /health ${med(rs.map((r) => r.ceilings.health_per_s))}/s (p99 ${med(rs.map((r) => r.ceilings.health_p99_ms ?? null))} ms), a submit request without the queue object ${med(rs.map((r) => r.ceilings.submit_request_without_queue_object_per_s ?? null))}/s, a queue-object call ${med(rs.map((r) => r.ceilings.queue_object_call_per_s))}/s, exactly_once ${rs.every((r) => r.exactly_once)}`,
    );
  }
  if (rs[0].d1)
    parts.push(
      `d1 rows read/written per job ${med(rs.map((r) => r.d1.rows_read_per_job))}/${med(rs.map((r) => r.d1.rows_written_per_job))}`,
      ...(rs[0].d1.queries_per_job == null
        ? []
        : [
            `D1 queries per job ${med(rs.map((r) => r.d1.queries_per_job))}, token checks among them ${med(rs.map((r) => r.d1.token_checks_per_job))}`,
          ]),
    );
  if (rs[0].tokens) parts.push(`tokens: ${rs[0].tokens.split(':')[0]}`);
  process.stderr.write(`[bench] ${label} (median of ${rs.length}): ${parts.join(', ')}\n`);
}
