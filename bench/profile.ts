/**
 * Where the edge plane's time goes: serves the Worker (scripts/serve.mjs) with a DevTools
 * inspector, runs N jobs through it (8 single-submit loops, a worker with concurrency 8 in this
 * process), and prints the self time of the hottest functions in each workerd isolate: the
 * Worker + queue object (core:user:lakeshore) and Miniflare's local D1 (d1:db, d1:db:entry).
 *
 *   node scripts/run.mjs node bench/profile.ts [--n=3000] [--bulk]   (--bulk: submits of 100)
 *   node scripts/run.mjs node bench/profile.ts --fan-in [--n=20000]   (256 connections of single submits, no worker)
 *   node scripts/run.mjs node bench/profile.ts --bulk --no-worker   (the producers' side alone: submits of 100, nothing claims)
 *   node scripts/run.mjs node bench/profile.ts --bulk --push [--push-batch=32]   (no worker: the queue pushes to a receiver here, 64 deliveries at once, or 16 of batches)
 *   node scripts/run.mjs node bench/profile.ts --bulk --listen   (one reader on the queue's feed throughout)
 * --save=DIR also writes each isolate's profile there (.cpuprofile: Chrome DevTools opens it).
 * --cpu runs without the inspector and prints CPU time per job instead: the plane's (serve.mjs and
 * its workerd: the Worker, its objects and local D1, on one thread) and this process's (producers
 * and worker). On this machine they move less from run to run than jobs/s does; bench/ab.ts
 * compares two builds of the plane that way.
 *
 * Sampling profiles of isolates that share one thread overlap: compare functions, not totals.
 */
import { spawn } from 'node:child_process';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { HttpDispatch, runWorker, encodeEnvelope } from '../client/local/index.ts';
import { applyMigrations, freePort, stopTree } from '../scripts/plane.mjs';
import { treeCpuMs } from './cpu.ts';

const dir = mkdtempSync(join(tmpdir(), 'lakeshore-profile-'));
await applyMigrations({ node: process.execPath, env: process.env, persistTo: dir });
const [port, inspector] = [await freePort(), await freePort()];
const cpu = process.argv.includes('--cpu');
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
    '--var',
    'PUSH_HOSTS:local',
    // it stops when this process's end closes its stdin, even one that crashed
    '--exit-with-parent',
    ...(cpu ? [] : ['--inspector-port', String(inspector)]),
  ],
  { stdio: ['pipe', 'pipe', 'inherit'], detached: true },
);
await new Promise<void>((r) => server.stdout!.on('data', (d) => String(d).includes('ready') && r()));
const url = `http://127.0.0.1:${port}`;
const targets = cpu ? [] : ['core:user:lakeshore', 'd1:db', 'd1:db:entry'];
/** With --cpu, the plane's CPU time so far (ms): serve.mjs and its workerd, from /proc. */
const planeMs = () => (cpu ? (treeCpuMs(server.pid!) ?? 0) : 0);
const sessions = await Promise.all(
  targets.map(async (t) => {
    const ws = new WebSocket(`ws://127.0.0.1:${inspector}/${t}`);
    await new Promise((r, j) => {
      ws.onopen = r;
      ws.onerror = j;
    });
    let id = 0;
    const pending = new Map<number, (v: any) => void>();
    ws.onmessage = (m) => {
      const d = JSON.parse(String(m.data));
      if (d.id && pending.has(d.id)) {
        pending.get(d.id)!(d.result);
        pending.delete(d.id);
      }
    };
    const send = (method: string, params = {}) =>
      new Promise<any>((r) => {
        const i = ++id;
        pending.set(i, r);
        ws.send(JSON.stringify({ id: i, method, params }));
      });
    return { t, send, ws };
  }),
);
for (const s of sessions) {
  await s.send('Profiler.enable');
  await s.send('Profiler.setSamplingInterval', { interval: 200 });
  await s.send('Profiler.start');
}
const N = Number(process.argv.find((a) => a.startsWith('--n='))?.slice(4) ?? 3000);
const d = new HttpDispatch(url, { token: 'tok', namespace: `prof${Date.now()}` });
if (process.argv.includes('--fan-in')) {
  const { Pool } = await import('undici');
  const pool = new Pool(url, { connections: 256, pipelining: 1 });
  const body = (i: number) =>
    JSON.stringify({ id: `j${i}`, envelope: Buffer.from(encodeEnvelope({ fn: 'noop', args: [i, 'x'.repeat(100)] })).toString('base64') });
  let k = 0;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: 256 }, async () => {
      for (let i = k++; i < N; i = k++) {
        const r = await pool.request({
          method: 'POST',
          path: `/v1/ns/${d.namespace}/queues/q/invocations`,
          headers: { authorization: 'Bearer tok', 'content-type': 'application/json' },
          body: body(i),
        });
        await r.body.text();
      }
    }),
  );
  console.log('submits/s', (N / ((performance.now() - t0) / 1000)).toFixed(0));
  await pool.close();
  await report();
}
const stop = new AbortController();
let done = 0;
if (process.argv.includes('--listen')) {
  // One reader on the queue's feed for the whole run, attached (a probe's record seen) before the clock starts.
  let seen = 0;
  void (async () => {
    for await (const r of d.events('q', { signal: stop.signal })) if (r.kind === 'job') seen++;
  })().catch(() => {});
  for (let i = 0; seen === 0 && i < 100; i++) {
    await d.submit('q', encodeEnvelope({ fn: 'noop', args: [-1, ''] }), { id: `probe-${i}`, delayMs: 3_600_000 });
    await new Promise((r) => setTimeout(r, 50));
  }
}
const [w0, c0, t0] = [planeMs(), process.cpuUsage(), performance.now()];
const noWorker = process.argv.includes('--no-worker');
const push = process.argv.includes('--push');
const pushBatch = Number(process.argv.find((a) => a.startsWith('--push-batch='))?.split('=')[1] ?? 1);
let receiver: Server | null = null;
if (push) {
  // The queue pushes to a receiver in this process that answers each delivery 200 at once.
  receiver = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      res.writeHead(200, { 'content-length': '0' }).end();
      const jobs = pushBatch > 1 ? (JSON.parse(Buffer.concat(chunks).toString()) as { jobs: unknown[] }).jobs.length : 1;
      done += jobs;
      if (done === N) stop.abort();
    });
  });
  await new Promise<void>((r) => receiver!.listen(0, '127.0.0.1', r));
  await d.configureQueue('q', {
    push: {
      url: `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/`,
      concurrency: pushBatch > 1 ? 16 : 64,
      timeoutMs: 30_000,
      batchSize: pushBatch,
    },
  });
}
const worker = noWorker
  ? Promise.resolve(0)
  : push
    ? new Promise((r) => stop.signal.addEventListener('abort', r, { once: true }))
    : runWorker('q', {
        dispatch: new HttpDispatch(url, { token: 'tok', namespace: d.namespace }),
        registry: {
          noop: () => {
            if (++done === N) stop.abort();
          },
        },
        concurrency: 8,
        prefetch: 'auto',
        stop: stop.signal,
        workerId: 'w1',
        claimWaitMs: 1000,
      });
let next = 0;
const bulk = process.argv.includes('--bulk');
const job = (i: number) => ({ envelope: encodeEnvelope({ fn: 'noop', args: [i, 'x'.repeat(100)] }), opts: { id: `j${i}` } });
await Promise.all(
  Array.from({ length: 8 }, async () => {
    while (next < N) {
      if (!bulk) {
        const { envelope, opts } = job(next++);
        await d.submit('q', envelope, opts);
        continue;
      }
      const items = [];
      while (items.length < 100 && next < N) items.push(job(next++));
      await d.submitMany('q', items);
    }
  }),
);
await worker;
const secs = (performance.now() - t0) / 1000;
console.log('jobs/s', (N / secs).toFixed(0));
if (cpu) {
  const [w, c] = [planeMs() - w0, process.cpuUsage(c0)];
  console.log(
    `CPU µs per job: plane ${((w * 1000) / N).toFixed(0)} (busy ${((w / 1000 / secs) * 100).toFixed(0)} % of the run), this process ${((c.user + c.system) / N).toFixed(0)}`,
  );
}
await report();

async function report(): Promise<never> {
  for (const s of sessions) {
    const { profile } = await s.send('Profiler.stop');
    const save = process.argv.find((a) => a.startsWith('--save='))?.slice(7);
    if (save) mkdirSync(save, { recursive: true });
    if (save) writeFileSync(join(save, `${s.t.replace(/[^a-z0-9]+/gi, '_')}.cpuprofile`), JSON.stringify(profile));
    const self = new Map<string, number>();
    const dt = profile.timeDeltas as number[];
    const byId = new Map(profile.nodes.map((n: any) => [n.id, n]));
    const counts = new Map<number, number>();
    profile.samples.forEach((sid: number, i: number) => {
      counts.set(sid, (counts.get(sid) ?? 0) + (dt[i] ?? 0));
    });
    let total = 0,
      idle = 0;
    for (const [sid, us] of counts) {
      const n: any = byId.get(sid);
      const f = n.callFrame;
      const key = `${f.functionName || '(anon)'} ${String(f.url).split('/').pop()}:${f.lineNumber}`;
      if (f.functionName === '(idle)') {
        idle += us;
        continue;
      }
      total += us;
      self.set(key, (self.get(key) ?? 0) + us);
    }
    console.log(`\n== ${s.t}: busy ${(total / 1000).toFixed(0)} ms, idle ${(idle / 1000).toFixed(0)} ms`);
    for (const [k, us] of [...self].sort((a, b) => b[1] - a[1]).slice(0, 14))
      console.log(`  ${(us / 1000).toFixed(1).padStart(7)} ms  ${k}`);
    s.ws.close();
  }
  await stopTree(server);
  rmSync(dir, { recursive: true, force: true });
  process.exit(0);
}
