/**
 * Is a change to the edge plane cheaper? Serves the plane from two trees at once (this working
 * tree as B, and a git ref checked out as A), runs the same load against each in turn, in ABBA
 * order, and reports the plane's CPU per job (serve.mjs and its workerd, from /proc) and jobs/s.
 * On these machines a plane's speed moves by a third from one minute to the next; segments a few
 * seconds long, alternated, see the same machine, so the per-pair ratio tells a change from noise.
 *
 *   node scripts/run.mjs node bench/ab.ts [--base=HEAD] [--load=single|bulk] [--pairs=8] [--n=2000] [--no-worker]
 *
 * --load=single: 8 loops of single submits (the client coalesces them, as in the bench's single
 * case) and a worker with concurrency 8, in this process; --load=bulk: 8 loops of submits of 100.
 * Each segment is N jobs, and ends when the worker has run them all. The client is this tree's
 * for both planes: what differs is only the plane.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { HttpDispatch, runWorker, encodeEnvelope } from '../client/local/index.ts';
import { treeCpuMs } from './cpu.ts';

/** This tree: plane B, and the repository the base is checked out from. */
const ROOT = fileURLToPath(new URL('..', import.meta.url));
const arg = (k: string, d: string) => process.argv.find((a) => a.startsWith(`--${k}=`))?.slice(k.length + 3) ?? d;
const BASE = arg('base', 'HEAD');
const LOAD = arg('load', 'single');
const PAIRS = Number(arg('pairs', '8'));
const N = Number(arg('n', LOAD === 'bulk' ? '10000' : '2000'));
/** --no-worker: nothing claims; a segment ends when its submits have answered (the producers' side alone). */
const NO_WORKER = process.argv.includes('--no-worker');
if (!['single', 'bulk'].includes(LOAD)) throw new Error(`--load is single or bulk, not ${LOAD}`);

interface Plane {
  name: string;
  url: string;
  pid: number;
  stop: () => Promise<void>;
  d: HttpDispatch;
  worker: Worker;
}
interface Worker {
  ran: number;
  waiting: { n: number; done: () => void } | null;
  stop: AbortController;
  running: Promise<number>;
}

/** How long one segment may take before the comparison gives up (a lost job would otherwise hang it). */
const SEGMENT_LIMIT_MS = 120_000;

const scratch = mkdtempSync(join(tmpdir(), 'lakeshore-ab-'));
const tree = join(scratch, 'base');
const rev = (dir: string) => execFileSync('git', ['-C', dir, 'rev-parse', '--short', 'HEAD']).toString().trim();
const dirty = execFileSync('git', ['-C', ROOT, 'status', '--porcelain', '--', 'src']).toString().trim() !== '';

const planes: Plane[] = [];
try {
  execFileSync('git', ['-C', ROOT, 'worktree', 'add', '--detach', tree, BASE], { stdio: ['ignore', 'ignore', 'inherit'] });
  symlinkSync(join(ROOT, 'node_modules'), join(tree, 'node_modules'));
  if (existsSync(join(ROOT, '.toolchain'))) symlinkSync(join(ROOT, '.toolchain'), join(tree, '.toolchain'));
  // The Worker serves the dashboard from a generated module (not in git): the base tree builds its own.
  execFileSync(process.execPath, [join(tree, 'scripts', 'dashboard.mjs')], { cwd: tree, stdio: ['ignore', 'ignore', 'inherit'] });
  for (const [name, root] of [
    [`A ${BASE} (${rev(tree)})`, tree],
    [`B working tree (${rev(ROOT)}${dirty ? ', with changes to src/' : ''})`, ROOT],
  ] as const) {
    // Each tree's own plane script: its Worker bundle, its migrations.
    const { startPlane } = await import(join(root, 'scripts', 'plane.mjs'));
    const dir = mkdtempSync(join(scratch, 'state-'));
    const p = await startPlane({
      node: process.execPath,
      env: process.env,
      persistTo: dir,
      vars: { LAKESHORE_TOKEN: 'tok', LIMIT_REQUESTS_PER_SECOND: '1000000', LIMIT_REQUEST_BURST: '1000000' },
    });
    const d = new HttpDispatch(p.url, { token: 'tok', namespace: 'ab' });
    const worker: Worker = { ran: 0, waiting: null, stop: new AbortController(), running: Promise.resolve(0) };
    const noop = () => {
      worker.ran++;
      if (worker.waiting && worker.ran >= worker.waiting.n) worker.waiting.done();
    };
    if (!NO_WORKER)
      worker.running = runWorker('q', {
        dispatch: new HttpDispatch(p.url, { token: 'tok', namespace: 'ab' }),
        registry: { noop },
        concurrency: 8,
        prefetch: 'auto',
        stop: worker.stop.signal,
        workerId: `ab-${planes.length}`,
        claimWaitMs: 2_000,
        graceMs: 5_000,
      });
    planes.push({ name, url: p.url, pid: p.pid, stop: p.stop, d, worker });
  }

  let seq = 0;
  const job = () => {
    const i = seq++;
    return { envelope: encodeEnvelope({ fn: 'noop', args: [i, 'x'.repeat(100)] }), opts: { id: `j${i}` } };
  };
  /** One segment of N jobs on a plane: its CPU per job (µs) and jobs/s. */
  const segment = async (p: Plane) => {
    const target = p.worker.ran + N;
    const drained = new Promise<void>((r) => (p.worker.waiting = { n: target, done: r }));
    const [c0, t0] = [treeCpuMs(p.pid)!, performance.now()];
    let left = N;
    await Promise.all(
      Array.from({ length: 8 }, async () => {
        while (left > 0) {
          if (LOAD === 'single') {
            left--;
            const { envelope, opts } = job();
            await p.d.submit('q', envelope, opts);
          } else {
            const k = Math.min(100, left);
            left -= k;
            await p.d.submitMany('q', Array.from({ length: k }, job));
          }
        }
      }),
    );
    if (!NO_WORKER) {
      let timer: ReturnType<typeof setTimeout> | undefined;
      const late = new Promise<never>(
        (_, reject) =>
          (timer = setTimeout(
            () => reject(new Error(`${p.name}: the worker ran ${p.worker.ran - (target - N)} of ${N} jobs in ${SEGMENT_LIMIT_MS} ms`)),
            SEGMENT_LIMIT_MS,
          )),
      );
      await Promise.race([drained, late]).finally(() => clearTimeout(timer));
    }
    p.worker.waiting = null;
    const secs = (performance.now() - t0) / 1000;
    return { us: ((treeCpuMs(p.pid)! - c0) * 1000) / N, rate: N / secs };
  };

  // Warm both (their isolates, D1, the JIT) before anything counts.
  for (const p of planes) await segment(p);
  const rows: { a: { us: number; rate: number }; b: { us: number; rate: number } }[] = [];
  for (let i = 0; i < PAIRS; i++) {
    // ABBA: a drift during the pair touches both sides alike.
    const [first, second] = i % 2 === 0 ? [planes[0]!, planes[1]!] : [planes[1]!, planes[0]!];
    const x = await segment(first);
    const y = await segment(second);
    const [a, b] = first === planes[0] ? [x, y] : [y, x];
    rows.push({ a, b });
    process.stderr.write(
      `pair ${i + 1}: A ${a.us.toFixed(0)} µs/job ${a.rate.toFixed(0)} jobs/s | B ${b.us.toFixed(0)} µs/job ${b.rate.toFixed(0)} jobs/s\n`,
    );
  }
  const median = (xs: number[]) => {
    const v = [...xs].sort((p, q) => p - q);
    const m = v.length >> 1;
    return v.length % 2 ? v[m]! : (v[m - 1]! + v[m]!) / 2;
  };
  const cpuRatio = rows.map((r) => r.b.us / r.a.us);
  const rateRatio = rows.map((r) => r.b.rate / r.a.rate);
  // D1 batches and queue-object calls per job over every segment (the warm-up too), for each plane.
  const perJob = await Promise.all(
    planes.map(async (p) => {
      const st = await fetch(`${p.url}/v1/ns/ab/queues/q/stats`, { headers: { authorization: 'Bearer tok' } }).then(
        (r) => r.json() as Promise<{ batches: number; calls: number }>,
      );
      const jobs = seq / planes.length; // each plane ran the same segments
      return { d1_batches: +(st.batches / jobs).toFixed(3), object_calls: +(st.calls / jobs).toFixed(3) };
    }),
  );
  console.log(
    JSON.stringify({
      bench: 'ab',
      a_per_job: perJob[0],
      b_per_job: perJob[1],
      load: LOAD,
      worker: !NO_WORKER,
      n: N,
      pairs: PAIRS,
      a: planes[0]!.name,
      b: planes[1]!.name,
      a_cpu_us_per_job: Math.round(median(rows.map((r) => r.a.us))),
      b_cpu_us_per_job: Math.round(median(rows.map((r) => r.b.us))),
      cpu_b_over_a: {
        median: +median(cpuRatio).toFixed(3),
        min: +Math.min(...cpuRatio).toFixed(3),
        max: +Math.max(...cpuRatio).toFixed(3),
        b_cheaper_in: cpuRatio.filter((x) => x < 1).length,
      },
      a_jobs_per_s: Math.round(median(rows.map((r) => r.a.rate))),
      b_jobs_per_s: Math.round(median(rows.map((r) => r.b.rate))),
      rate_b_over_a: {
        median: +median(rateRatio).toFixed(3),
        min: +Math.min(...rateRatio).toFixed(3),
        max: +Math.max(...rateRatio).toFixed(3),
        b_faster_in: rateRatio.filter((x) => x > 1).length,
      },
    }),
  );
} finally {
  for (const p of planes) {
    p.worker.stop.abort();
    await p.worker.running.catch(() => 0);
    await p.d.close();
    await p.stop();
  }
  if (existsSync(tree)) execFileSync('git', ['-C', ROOT, 'worktree', 'remove', '--force', tree], { stdio: 'ignore' });
  rmSync(scratch, { recursive: true, force: true });
}
process.exit(0);
