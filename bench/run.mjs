// `npm run bench`: the common workload on the local SQLite plane and the local edge plane.
//   npm run bench                 3 runs of each case, N=20000 (long)
//   npm run bench -- --quick      one run of each case, N=2000
// Each run prints one JSON line (see bench/README.md); a summary of medians goes to stderr.
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { ROOT } from '../scripts/toolchain.mjs';

const quick = process.argv.includes('--quick');
const reps = quick ? 1 : Number(process.env.REPS ?? 3);
const n = quick ? 2000 : 20000;
const cases = [
  ['local-single', '--system=lakeshore-local', '--enqueue=single'],
  ['local-bulk', '--system=lakeshore-local', '--enqueue=bulk'],
  ['local-idle', '--system=lakeshore-local', '--mode=idle', `--idle-n=${quick ? 100 : 500}`],
  ['edge-single', '--system=lakeshore-edge', '--enqueue=single'],
  ['edge-bulk', '--system=lakeshore-edge', '--enqueue=bulk'],
  ['edge-idle', '--system=lakeshore-edge', '--mode=idle', `--idle-n=${quick ? 100 : 500}`],
];
const only = process.argv.slice(2).filter((a) => !a.startsWith('--'));
const rows = [];
for (let rep = 1; rep <= reps; rep++) {
  for (const [label, ...args] of cases) {
    if (only.length && !only.includes(label)) continue;
    process.stderr.write(`[bench] rep ${rep}: ${label}\n`);
    const r = spawnSync(process.execPath, ['--disable-warning=ExperimentalWarning', join(ROOT, 'bench', 'workload.ts'), ...args, `--n=${n}`, `--label=${label}`], {
      cwd: ROOT, encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'], timeout: 15 * 60_000,
    });
    const line = (r.stdout ?? '').trim().split('\n').pop();
    if (line) {
      process.stdout.write(`${line}\n`);
      rows.push(JSON.parse(line));
    } else process.stderr.write(`[bench] ${label} produced no result (exit ${r.status})\n`);
  }
}
const med = (xs) => { const s = xs.filter((x) => x != null).sort((a, b) => a - b); return s.length ? s[Math.floor((s.length - 1) / 2)] : null; };
for (const label of [...new Set(rows.map((r) => r.label))]) {
  const rs = rows.filter((r) => r.label === label);
  process.stderr.write(`[bench] ${label}: jobs/s ${med(rs.map((r) => r.throughput_jobs_per_s))}, p50 ${med(rs.map((r) => r.latency_ms.p50))} ms, p99 ${med(rs.map((r) => r.latency_ms.p99))} ms, exactly_once ${rs.every((r) => r.exactly_once)}\n`);
}
