// `npm run fault`: the long versions of the reliability tests (CI runs short ones in `npm test`).
//   hostile input: 10,000 generated requests (FUZZ_N)    model-based: 2,000 sequences (MODEL_RUNS)
//   SSE reconnect: 200 cuts (SSE_CUTS)                    ambiguous responses: 100 rounds (AMBIGUOUS_N)
//   server kill: 10,000 jobs, 20 SIGKILLs (CRASH_JOBS, CRASH_KILLS)   worker kill: 100 (WORKER_KILLS)
//   plane outage under a Node and a Python worker: 60 s (OUTAGE_S)
//   fan-out: 1,000 SSE readers of one job (FANOUT_READERS)
//   guard mutants: each guard of test/mutants.json broken in turn, the fast tier must fail (scripts/mutants.mjs)
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { ROOT } from './toolchain.mjs';

const vitest = join(ROOT, 'node_modules', 'vitest', 'vitest.mjs');
const runs = [
  {
    name: 'hostile input',
    args: ['run', '-c', 'vitest.edge.config.ts', 'test/edge/fuzz.test.ts'],
    env: { FUZZ_N: process.env.FUZZ_N ?? '10000' },
  },
  {
    name: 'model-based',
    args: ['run', '-c', 'vitest.node.config.ts', 'test/model'],
    env: { MODEL_RUNS: process.env.MODEL_RUNS ?? '2000' },
  },
  {
    name: 'SSE cuts and ambiguous responses',
    args: ['run', '-c', 'vitest.node.config.ts', 'test/fault'],
    env: { SSE_CUTS: process.env.SSE_CUTS ?? '200', AMBIGUOUS_N: process.env.AMBIGUOUS_N ?? '100' },
  },
  {
    name: 'fan-out',
    args: ['run', '-c', 'vitest.node.config.ts', 'test/node/fan-out.test.ts'],
    env: { FANOUT_READERS: process.env.FANOUT_READERS ?? '1000' },
  },
  {
    name: 'server and worker kills',
    args: ['run', '-c', 'vitest.crash.config.ts'],
    env: {
      CRASH_JOBS: process.env.CRASH_JOBS ?? '10000',
      CRASH_KILLS: process.env.CRASH_KILLS ?? '20',
      WORKER_KILLS: process.env.WORKER_KILLS ?? '100',
      OUTAGE_S: process.env.OUTAGE_S ?? '60',
    },
  },
  { name: 'guard mutants', script: join(ROOT, 'scripts', 'mutants.mjs'), args: [], env: {} },
];
let failed = 0;
for (const r of runs) {
  process.stderr.write(
    `\n[fault] ${r.name} (${Object.entries(r.env)
      .map(([k, v]) => `${k}=${v}`)
      .join(' ')})\n`,
  );
  const t0 = Date.now();
  const res = spawnSync(process.execPath, [r.script ?? vitest, ...r.args], {
    cwd: ROOT,
    stdio: 'inherit',
    env: { ...process.env, ...r.env },
  });
  process.stderr.write(`[fault] ${r.name}: ${res.status === 0 ? 'ok' : 'FAILED'} in ${((Date.now() - t0) / 1000).toFixed(1)}s\n`);
  if (res.status !== 0) failed++;
}
process.exit(failed ? 1 : 0);
