/**
 * The worker process's own cost: serves the edge plane (scripts/serve.mjs), fills a queue with N
 * no-op jobs (submits of 100), then runs runWorker (concurrency 8, prefetch auto) in this process
 * until it has drained them, and prints this process's CPU per job over the drain alone, with how
 * its acks went (riding claims, or alone). In the bench's edge cases the worker's CPU a job is
 * about two thirds of the plane's, on the same two cores.
 *
 *   node scripts/run.mjs node bench/worker-cpu.ts [--n=20000] [--prof] [--heap]
 *
 * --prof: the hottest functions by self time (V8's sampling profiler, in this process).
 * --heap: where the drain allocates, by function (V8's sampling heap profiler), and bytes a job.
 * On these machines one run moves by a fifth: compare two trees in alternating runs.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { Session } from 'node:inspector/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { HttpDispatch, runWorker, encodeEnvelope } from '../client/local/index.ts';
import { applyMigrations, freePort, stopTree } from '../scripts/plane.mjs';

type Node = { callFrame: { functionName: string; url: string; lineNumber: number }; selfSize?: number; children?: Node[]; id?: number };
const where = (f: Node['callFrame']) => `${f.functionName || '(anon)'} ${String(f.url).split('/').pop()}:${f.lineNumber}`;
const top = (m: Map<string, number>, unit: string, scale: number) =>
  [...m]
    .sort((a, b) => b[1] - a[1])
    .slice(0, 25)
    .map(([k, v]) => `  ${(v / scale).toFixed(1).padStart(8)} ${unit}  ${k}`)
    .join('\n');

const N = Number(process.argv.find((a) => a.startsWith('--n='))?.slice(4) ?? 20_000);
const [prof, heap] = [process.argv.includes('--prof'), process.argv.includes('--heap')];
const dir = mkdtempSync(join(tmpdir(), 'lakeshore-profile-'));
await applyMigrations({ node: process.execPath, env: process.env, persistTo: dir });
const port = await freePort();
const server = spawn(
  process.execPath,
  [
    'scripts/serve.mjs',
    '--port',
    String(port),
    '--persist-to',
    dir,
    '--var',
    'LAKESHORE_TOKEN:tok',
    '--var',
    'LIMIT_REQUESTS_PER_SECOND:1000000',
    '--var',
    'LIMIT_REQUEST_BURST:1000000',
  ],
  { stdio: ['ignore', 'pipe', 'inherit'], detached: true },
);
try {
  await new Promise<void>((r) => server.stdout!.on('data', (d) => String(d).includes('ready') && r()));
  const url = `http://127.0.0.1:${port}`;
  const namespace = `w${Date.now()}`;
  const producer = new HttpDispatch(url, { token: 'tok', namespace });
  let next = 0;
  await Promise.all(
    Array.from({ length: 8 }, async () => {
      while (next < N) {
        const items = [];
        while (items.length < 100 && next < N)
          items.push({ envelope: encodeEnvelope({ fn: 'noop', args: [next, 'x'.repeat(100)] }), opts: { id: `j${next++}` } });
        await producer.submitMany('q', items);
      }
    }),
  );
  await producer.close();

  // The worker's dispatch, counting how its acks went: with a claim, or alone (coalesced batches).
  const d = new HttpDispatch(url, { token: 'tok', namespace });
  const count = { claims: 0, riding: 0, alone: 0 };
  const ackAndClaim = d.ackAndClaim.bind(d);
  const claimMany = d.claimMany.bind(d);
  const ack = d.ack.bind(d);
  d.ackAndClaim = (q, w, acks, max, o) => {
    count.claims++;
    count.riding += acks.length;
    return ackAndClaim(q, w, acks, max, o);
  };
  d.claimMany = (q, w, max, o) => {
    count.claims++;
    return claimMany(q, w, max, o);
  };
  d.ack = (id, w, o) => {
    count.alone++;
    return ack(id, w, o);
  };

  const session = new Session();
  session.connect();
  if (heap) {
    await session.post('HeapProfiler.enable');
    await session.post('HeapProfiler.startSampling', {
      samplingInterval: 4096,
      includeObjectsCollectedByMajorGC: true,
      includeObjectsCollectedByMinorGC: true,
    });
  }
  if (prof) {
    await session.post('Profiler.enable');
    await session.post('Profiler.setSamplingInterval', { interval: 200 });
    await session.post('Profiler.start');
  }
  const stop = new AbortController();
  let done = 0;
  const [c0, t0] = [process.cpuUsage(), performance.now()];
  await runWorker('q', {
    dispatch: d,
    registry: {
      noop: () => {
        if (++done === N) stop.abort();
      },
    },
    concurrency: 8,
    prefetch: 'auto',
    stop: stop.signal,
    workerId: 'w1',
    claimWaitMs: 2_000,
    graceMs: 5_000,
  });
  const [c, secs] = [process.cpuUsage(c0), (performance.now() - t0) / 1000];
  console.log(
    JSON.stringify({
      jobs: N,
      drain_jobs_per_s: Math.round(N / secs),
      worker_cpu_us_per_job: +((c.user + c.system) / N).toFixed(1),
      user_us: +(c.user / N).toFixed(1),
      system_us: +(c.system / N).toFixed(1),
      claims: count.claims,
      acks_riding: count.riding,
      acks_alone: count.alone,
    }),
  );
  if (heap) {
    const { profile } = (await session.post('HeapProfiler.stopSampling')) as unknown as { profile: { head: Node } };
    const by = new Map<string, number>();
    const walk = (n: Node) => {
      if (n.selfSize) by.set(where(n.callFrame), (by.get(where(n.callFrame)) ?? 0) + n.selfSize);
      for (const k of n.children ?? []) walk(k);
    };
    walk(profile.head);
    const total = [...by.values()].reduce((a, b) => a + b, 0);
    console.log(`allocated (sampled): ${(total / N).toFixed(0)} bytes a job\n${top(by, 'MB', 1e6)}`);
  }
  if (prof) {
    const { profile } = (await session.post('Profiler.stop')) as unknown as {
      profile: { nodes: Node[]; samples: number[]; timeDeltas: number[] };
    };
    const nodes = new Map(profile.nodes.map((n) => [n.id!, n]));
    const by = new Map<string, number>();
    profile.samples.forEach((id, i) => {
      const k = where(nodes.get(id)!.callFrame);
      if (!k.startsWith('(idle)')) by.set(k, (by.get(k) ?? 0) + (profile.timeDeltas[i] ?? 0));
    });
    console.log(`self time, busy ${([...by.values()].reduce((a, b) => a + b, 0) / 1000).toFixed(0)} ms\n${top(by, 'ms', 1000)}`);
  }
  session.disconnect();
  await d.close();
} finally {
  await stopTree(server);
  rmSync(dir, { recursive: true, force: true });
}
