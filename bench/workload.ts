/**
 * The common benchmark workload (../shared/bench/WORKLOAD.md) against lakeshore. Prints exactly
 * one JSON line on stdout per run; progress goes to stderr.
 *
 *   node bench/workload.ts --system=lakeshore-local|lakeshore-edge [--mode=throughput|idle]
 *        [--enqueue=single|bulk] [--n=20000] [--p=8] [--w=8] [--payload=100] [--batch=100]
 *        [--idle-n=500] [--d1-delay-ms=0] [--server=miniflare|wrangler] [--label=...]
 *        [--consumer=pull|push] [--push-concurrency=16] [--push-batch=1]
 *
 * The coordinator is the producer (P loops); the worker is a forked child process running
 * runWorker with concurrency W and a no-op handler, as in a real deployment. Enqueue time is taken
 * just before the enqueue call, start time as the handler's first statement; the clock offset
 * between the processes is estimated by IPC ping-pong and subtracted.
 *
 * With --consumer=push (the edge plane only) the child runs no worker: it is the push target, an
 * HTTP server on loopback that answers each delivery 200 at once, and the queue pushes to it with
 * that many deliveries at once (docs/contract.md, "Push delivery"). Start time is then when the
 * delivery reached the receiver; the same producers, the same drain.
 */
import { fork } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Agent, createServer, get as httpGet } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Dispatch, HttpDispatch, runWorker, encodeEnvelope, decodeEnvelope, type DispatchPlane } from '../client/local/index.ts';
import { newToken, startPlane } from '../scripts/plane.mjs';
import { cpuMs, treeCpuMs } from './cpu.ts';

const now = () => performance.timeOrigin + performance.now();
const arg = (name: string, dflt: string) => process.argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3) ?? dflt;
const O = {
  system: arg('system', 'lakeshore-local'),
  mode: arg('mode', 'throughput'),
  enqueue: arg('enqueue', 'single'),
  n: Number(arg('n', '20000')),
  p: Number(arg('p', '8')),
  w: Number(arg('w', '8')),
  payload: Number(arg('payload', '100')),
  batch: Number(arg('batch', '100')),
  idleN: Number(arg('idle-n', '500')),
  d1DelayMs: Number(arg('d1-delay-ms', '0')),
  label: arg('label', ''),
  server: arg('server', 'miniflare'),
  role: arg('role', 'coord'),
  prefetch: arg('prefetch', 'auto'),
  /** --listen=1: one reader follows the queue's lifecycle feed for the whole run (its records are counted). */
  /** Readers on the queue's feed for the whole run, in a process of their own (0: none). */
  listen: Number(arg('listen', '0')),
  /** pull: a forked worker process runs runWorker; push: it runs an HTTP receiver the queue pushes to. */
  consumer: arg('consumer', 'pull'),
  pushConcurrency: Number(arg('push-concurrency', '16')),
  /** Jobs in one delivery (the queue's push.batch_size): above 1, the receiver gets lakeshore.batch bodies. */
  pushBatch: Number(arg('push-batch', '1')),
};
const TOTAL = O.mode === 'idle' ? O.idleN : O.n;
/** How long a throughput run may drain before it reports what it has (its exactly-once check then fails). */
const DRAIN_LIMIT_MS = 300_000;
const log = (...a: unknown[]) => console.error(`[${O.role}]`, ...a);
const pct = (s: number[], p: number) =>
  s.length ? +s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))]!.toFixed(3) : null;

function planeFor(conn: { kind: string; path?: string; url?: string; token?: string; ns: string }): DispatchPlane {
  return conn.kind === 'local'
    ? new Dispatch(conn.path!, { namespace: conn.ns })
    : new HttpDispatch(conn.url!, { token: conn.token, namespace: conn.ns, timeout: 120_000 });
}

// ---------------------------------------------------------------- worker role
async function worker() {
  const conn = JSON.parse(arg('conn', '{}'));
  const d = planeFor(conn);
  const starts = new Float64Array(TOTAL).fill(NaN);
  const counts = new Uint16Array(TOTAL);
  const stop = new AbortController();
  const idle = O.mode === 'idle';
  let unique = 0;
  const noop = (seq: number) => {
    const t = now();
    if ((counts[seq] = (counts[seq] ?? 0) + 1) === 1) {
      starts[seq] = t;
      // The coordinator asks the store for the drain's end only from here (as the peers' harness does).
      if (++unique === TOTAL && !idle) process.send!({ type: 'all_started' });
    }
    if (idle) process.send!({ type: 'start', seq, t });
  };
  let cpuAtMark = process.cpuUsage();
  let cpuAtEnd: NodeJS.CpuUsage | null = null;
  process.on('message', (m: { type: string; t0?: number }) => {
    if (m.type === 'ping') process.send!({ type: 'pong', t0: m.t0, tc: now() });
    else if (m.type === 'mark') cpuAtMark = process.cpuUsage();
    else if (m.type === 'drained') cpuAtEnd = process.cpuUsage(cpuAtMark);
    else if (m.type === 'report')
      process.send!({
        type: 'report',
        starts: Array.from(starts),
        counts: Array.from(counts),
        cpu_ms: cpuMs(cpuAtEnd ?? process.cpuUsage(cpuAtMark)),
      });
    else if (m.type === 'stop') stop.abort();
  });
  if (O.consumer === 'push') {
    // The push target: the queue object POSTs each job; its seq is the envelope's first argument.
    const server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        // One job, or a batch of them (an empty 200 acks every job of a batch).
        const delivery = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { envelope?: string; jobs?: { envelope: string }[] };
        for (const j of delivery.jobs ?? [delivery as { envelope: string }]) {
          const env = decodeEnvelope(Buffer.from(j.envelope, 'base64'));
          noop(Number(env.args[0]));
        }
        res.writeHead(200, { 'content-length': '0' }).end();
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    process.send!({ type: 'ready', url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/push` });
    await new Promise<void>((r) => stop.signal.addEventListener('abort', () => r(), { once: true }));
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
    await d.close();
    process.send!({ type: 'stopped' });
    setTimeout(() => process.exit(0), 50);
    return;
  }
  const running = runWorker(conn.queue, {
    dispatch: d,
    registry: { noop },
    concurrency: O.w,
    prefetch: O.prefetch === 'auto' ? 'auto' : Number(O.prefetch),
    stop: stop.signal,
    workerId: `bench-${process.pid}`,
    graceMs: 5_000,
    claimWaitMs: 2_000,
  });
  process.send!({ type: 'ready' });
  await running;
  await d.close();
  process.send!({ type: 'stopped' });
  setTimeout(() => process.exit(0), 50);
}

interface QueueStats {
  read: number;
  written: number;
  batches: number;
  plans: number;
  d1_ms: number;
  calls: number;
  callMs: number;
  d1_model: Record<string, { queries: number }> | undefined;
  token_reads: number;
}

// ---------------------------------------------------------------- coordinator role
async function coordinator() {
  const result: Record<string, unknown> = {
    system: O.system,
    mode: O.mode,
    enqueue: O.mode === 'idle' ? 'single' : O.enqueue,
    N: TOTAL,
    P: O.mode === 'idle' ? 1 : O.p,
    W: O.w,
    payload_bytes: O.payload,
    batch: O.enqueue === 'bulk' && O.mode !== 'idle' ? O.batch : null,
    label: O.label || undefined,
    node: process.version,
    consumer: O.consumer,
    worker:
      O.consumer === 'push' ? { push_concurrency: O.pushConcurrency, push_batch: O.pushBatch } : { concurrency: O.w, prefetch: O.prefetch },
    d1_delay_ms: O.system === 'lakeshore-edge' ? O.d1DelayMs : undefined,
    server: O.system === 'lakeshore-edge' ? O.server : undefined,
  };
  const dir = mkdtempSync(join(process.env.BENCH_STATE_DIR ?? tmpdir(), 'lakeshore-bench-'));
  const ns = `bench${Date.now().toString(36)}`;
  const queue = 'bench';
  let plane: { url: string; pid?: number; stop: () => Promise<void> } | null = null;
  let conn: Record<string, unknown>;
  let workerConn: Record<string, unknown> | null = null;
  let operator: HttpDispatch | null = null;
  let rootToken = '';
  if (O.system === 'lakeshore-local') conn = { kind: 'local', path: join(dir, 'dispatch.sqlite'), ns, queue };
  else {
    const token = newToken('lsk_bench_');
    plane = await startPlane({
      node: process.execPath,
      env: process.env,
      persistTo: dir,
      vars: {
        LAKESHORE_TOKEN: token,
        SIMULATED_D1_DELAY_MS: String(O.d1DelayMs),
        // Counts every D1 query (no service time): the run reports queries per job.
        COUNT_D1_QUERIES: '1',
        // One producer token carries every producer loop here: its request budget (2,000/s by default)
        // raised, as a deployment for this load would.
        LIMIT_REQUESTS_PER_SECOND: '1000000',
        LIMIT_REQUEST_BURST: '1000000',
      },
      server: O.server as 'miniflare' | 'wrangler',
    });
    // The tokens users use: the operator (the root token) makes a producer token and a worker
    // token; the producers submit with the one, the worker claims and acks with the other.
    operator = new HttpDispatch(plane!.url, { token, namespace: ns });
    const [producer, worker] = [await operator.createToken('producer'), await operator.createToken('worker')];
    rootToken = token;
    conn = { kind: 'edge', url: plane!.url, token: producer.token, ns, queue };
    workerConn = { ...conn, token: worker.token };
    result.tokens = 'scoped: producer and worker tokens; the root token only for the operator (push settings, counts, stats)';
  }
  const d = planeFor(conn as never);
  const op: DispatchPlane = operator ?? d;
  /** The queue object's figures (the operator's stats route): D1 batches, rows, and the isolate's D1 queries and token reads. */
  const queueStats = () =>
    fetch(`${plane!.url}/v1/ns/${ns}/queues/${queue}/stats`, { headers: { authorization: `Bearer ${rootToken}` } }).then(
      (r) => r.json() as Promise<QueueStats>,
    );
  const child = fork(
    new URL(import.meta.url).pathname,
    [...process.argv.slice(2), '--role=worker', `--conn=${JSON.stringify(workerConn ?? conn)}`],
    {
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    },
  );
  const inbox = new Map<string, (m: any) => void>();
  const buffered = new Map<string, any>();
  child.on('message', (m: any) => {
    const key = m.type === 'start' ? `start:${m.seq}` : m.type;
    const w = inbox.get(key);
    if (w) {
      inbox.delete(key);
      w(m);
    } else buffered.set(key, m);
  });
  const next = (key: string) =>
    new Promise<any>((r) => {
      if (buffered.has(key)) {
        const m = buffered.get(key);
        buffered.delete(key);
        r(m);
      } else inbox.set(key, r);
    });
  const ready = await next('ready');
  if (O.consumer === 'push') {
    if (O.system !== 'lakeshore-edge') throw new Error('--consumer=push measures the edge plane, which pushes by itself');
    await op.configureQueue(queue, {
      push: { url: ready.url, concurrency: O.pushConcurrency, timeoutMs: 30_000, batchSize: O.pushBatch },
    });
  }
  // Feed readers (--listen=N): a process of their own, as a dashboard or an events() consumer would
  // be, so their parsing costs neither the producers nor the worker.
  let listeners: ReturnType<typeof fork> | null = null;
  let gaps: number[] = [];
  /** The readers' process's CPU (ms) at its last answer, and when the run started. */
  let readersCpu = 0;
  let readersCpu0 = 0;
  const heard = () =>
    new Promise<number[]>((r) => {
      listeners!.once('message', (m: { counts: number[]; gaps: number[]; cpu_ms: number }) => {
        gaps = m.gaps;
        readersCpu = m.cpu_ms;
        r(m.counts);
      });
      listeners!.send({ type: 'counts' });
    });
  if (O.listen) {
    listeners = fork(new URL(import.meta.url).pathname, [...process.argv.slice(2), '--role=listeners', `--conn=${JSON.stringify(conn)}`], {
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    // Attached once every reader has seen a probe's record.
    for (let i = 0; i < 100 && Math.min(...(await heard())) === 0; i++) {
      await d.submit(queue, encodeEnvelope({ fn: 'noop', args: [-1, ''] }), { id: `probe-${i}`, delayMs: 3_600_000 });
      await new Promise((r) => setTimeout(r, 50));
    }
    result.feed_listener = true;
    result.feed_readers = O.listen;
    readersCpu0 = readersCpu;
  }
  let best = { rtt: Infinity, off: 0 };
  for (let i = 0; i < 50; i++) {
    const t0 = now();
    const pong = next('pong');
    child.send({ type: 'ping', t0 });
    const m = await pong;
    const t1 = now();
    if (t1 - t0 < best.rtt) best = { rtt: t1 - t0, off: m.tc - (t0 + t1) / 2 };
  }
  result.clock_offset_ms = +best.off.toFixed(3);

  const pad = 'x'.repeat(O.payload);
  const env = (seq: number) => encodeEnvelope({ fn: 'noop', args: [seq, pad] });
  const tEnq = new Float64Array(TOTAL).fill(NaN);
  let tFirst = 0;
  // CPU from the first enqueue to the drain's end: this process (the producers), the worker
  // process, and the edge plane's process tree (serve.mjs and workerd).
  const atMark = plane ? await queueStats() : null;
  child.send({ type: 'mark' });
  const planeAtMark = plane?.pid ? treeCpuMs(plane.pid) : null;
  const cpu0 = { self: process.cpuUsage(), plane: planeAtMark };
  let cpu: { self: number; plane: number | null } | null = null;
  if (O.mode === 'throughput') {
    let nextSeq = 0;
    tFirst = now();
    await Promise.all(
      Array.from({ length: O.p }, async () => {
        while (nextSeq < TOTAL) {
          if (O.enqueue === 'single') {
            const seq = nextSeq++;
            tEnq[seq] = now();
            await d.submit(queue, env(seq), { id: `j${seq}` });
          } else {
            const from = nextSeq;
            const to = Math.min(TOTAL, from + O.batch);
            nextSeq = to;
            const t = now();
            const items = [];
            for (let s = from; s < to; s++) {
              tEnq[s] = t;
              items.push({ envelope: env(s), opts: { id: `j${s}` } });
            }
            await d.submitMany(queue, items);
          }
        }
      }),
    );
    result.enqueue_s = +((now() - tFirst) / 1000).toFixed(3);
    log(`enqueued ${TOTAL} in ${result.enqueue_s}s`);
    // As the peers' harness (../shared/peers/workload.mjs) does: wait until the worker has started
    // every job, then ask the store every 10 ms until it says all succeeded. Asking through the whole
    // drain would load the plane being measured (a count over the succeeded rows each time).
    const deadline = now() + DRAIN_LIMIT_MS;
    const started = await Promise.race([next('all_started'), new Promise((r) => setTimeout(() => r(null), DRAIN_LIMIT_MS))]);
    if (started === null) result.timed_out = true;
    while (now() < deadline && (await op.count(queue, 'succeeded')) < TOTAL) await new Promise((r) => setTimeout(r, 10));
    if (now() >= deadline) result.timed_out = true;
    result.drain_s = +((now() - tFirst) / 1000).toFixed(3);
    child.send({ type: 'drained' });
    const planeMs = plane?.pid && cpu0.plane !== null ? treeCpuMs(plane.pid) : null;
    cpu = { self: cpuMs(process.cpuUsage(cpu0.self)), plane: planeMs === null ? null : planeMs - cpu0.plane! };
    result.throughput_jobs_per_s = +(TOTAL / (result.drain_s as number)).toFixed(1);
  } else {
    tFirst = now();
    // Each submit's own round trip, in this same pause-then-submit rhythm: the floor an idle pickup stands on.
    const rtt: number[] = [];
    for (let seq = 0; seq < TOTAL; seq++) {
      const started = next(`start:${seq}`);
      tEnq[seq] = now();
      await d.submit(queue, env(seq), { id: `j${seq}` });
      rtt.push(now() - tEnq[seq]!);
      await started;
      await new Promise((r) => setTimeout(r, Math.random() * 50));
    }
    rtt.sort((a, b) => a - b);
    result.submit_rtt_ms = { p50: pct(rtt, 50), p99: pct(rtt, 99) };
    // The last job has started, but its ack may still be on its way (a submit's round trip here
    // is ~8 ms, and the pause before this point is 0-50 ms): ask the store every 10 ms until it says
    // all succeeded, as the throughput mode does, within the same bound. A lost ack never gets there.
    const settled = now();
    const deadline = settled + DRAIN_LIMIT_MS;
    while (now() < deadline && (await op.count(queue, 'succeeded')) < TOTAL) await new Promise((r) => setTimeout(r, 10));
    if (now() >= deadline) result.timed_out = true;
    result.last_ack_wait_ms = +(now() - settled).toFixed(1);
    // The runtime's own hops at this same pace (a pause of 0-50 ms before each), the floor under a
    // submit's round trip here: /health (the Worker alone), and a call to the queue object that
    // reads no D1 (its stats). A pause makes each hop slower than back to back.
    if (plane) {
      const paced = async (call: () => Promise<unknown>) => {
        const took: number[] = [];
        for (let i = 0; i < 100; i++) {
          await new Promise((r) => setTimeout(r, Math.random() * 50));
          const t = now();
          await call();
          took.push(now() - t);
        }
        return pct(
          took.sort((a, b) => a - b),
          50,
        );
      };
      // node:http on a kept-alive connection, as the client's own requests go
      const agent = new Agent({ keepAlive: true, maxSockets: 1 });
      const get = (path: string, token?: string) =>
        new Promise<void>((done, fail) =>
          httpGet(`${plane.url}${path}`, { agent, headers: token ? { authorization: `Bearer ${token}` } : {} }, (r) => {
            r.resume();
            r.on('end', done);
          }).on('error', fail),
        );
      result.paced_rtt_ms = {
        health: await paced(() => get('/health')),
        queue_object: await paced(() => get(`/v1/ns/${ns}/queues/${queue}/stats`, rootToken)),
      };
      agent.destroy();
    }
  }
  const report = next('report');
  child.send({ type: 'report' });
  const rep = await report;
  const lat: number[] = [];
  let dup = 0;
  let missing = 0;
  for (let s = 0; s < TOTAL; s++) {
    const c = rep.counts[s];
    if (c === 0) missing++;
    else if (c > 1) dup += c - 1;
    if (c > 0) lat.push(rep.starts[s] - best.off - tEnq[s]!);
  }
  lat.sort((a, b) => a - b);
  const succeeded = await op.count(queue, 'succeeded');
  result.latency_ms = { p50: pct(lat, 50), p95: pct(lat, 95), p99: pct(lat, 99), max: pct(lat, 100), samples: lat.length };
  result.completion = { duplicates: dup, missing, store_succeeded: succeeded };
  if (cpu) {
    const us = (ms: number | null) => (ms === null ? null : Math.round((ms * 1000) / TOTAL));
    // Per job over the run; `busy` is the share of the run's wall time each process was on a core.
    const busy = (ms: number | null) => (ms === null ? null : +(ms / ((result.drain_s as number) * 1000)).toFixed(2));
    result.cpu_us_per_job = { producers: us(cpu.self), worker: us(rep.cpu_ms), plane: us(cpu.plane) };
    result.cpu_busy = { producers: busy(cpu.self), worker: busy(rep.cpu_ms), plane: busy(cpu.plane) };
  }
  result.exactly_once = dup === 0 && missing === 0 && succeeded === TOTAL;
  if (listeners) {
    // Each reader's job records (3 a job: submitted, claimed, succeeded), and how long after the
    // drain's end the slowest reader had every one (null: not within 10 s).
    const want = 3 * TOTAL;
    const t = now();
    let counts = await heard();
    // The readers' own CPU over the run, per job: on this 2-core machine it is taken from the plane,
    // the producers and the worker alike (what one reader costs where readers run elsewhere is the plane's share).
    result.feed_readers_cpu_us_per_job = Math.round(((readersCpu - readersCpu0) * 1000) / TOTAL);
    while (Math.min(...counts) < want && now() - t < 10_000) {
      await new Promise((r) => setTimeout(r, 20));
      counts = await heard();
    }
    result.feed_records = counts;
    // A reader more than 4 MB behind is cut; it resumes, and is told of a gap when it is past the window.
    result.feed_gaps = gaps;
    result.feed_caught_up_ms = Math.min(...counts) >= want ? +(now() - t).toFixed(0) : null;
    listeners.kill();
  }
  if (plane) {
    const s = await queueStats();
    result.queue_object = { calls_per_job: +(s.calls / TOTAL).toFixed(2), ms_per_call: +(s.callMs / Math.max(1, s.calls)).toFixed(2) };
    // Every D1 query of the plane during the run (COUNT_D1_QUERIES: every database, the Worker's and
    // the objects'), and among them the token checks (a scoped token's row read on an isolate's first sight).
    const queries = (m: QueueStats['d1_model']) => Object.values(m ?? {}).reduce((n, l) => n + l.queries, 0);
    result.d1 = {
      ms_per_batch: +(s.d1_ms / Math.max(1, s.batches)).toFixed(2),
      batches: s.batches,
      rows_read_per_job: +(s.read / TOTAL).toFixed(2),
      rows_written_per_job: +(s.written / TOTAL).toFixed(2),
      plans_per_batch: +(s.plans / Math.max(1, s.batches)).toFixed(2),
      queries_per_job: atMark ? +((queries(s.d1_model) - queries(atMark.d1_model)) / TOTAL).toFixed(3) : null,
      token_checks_per_job: atMark ? +((s.token_reads - atMark.token_reads) / TOTAL).toFixed(4) : null,
    };
  }
  const stopped = next('stopped');
  child.send({ type: 'stop' });
  await Promise.race([stopped, new Promise((r) => setTimeout(r, 10_000))]);
  await d.close();
  if (plane) await plane.stop();
  rmSync(dir, { recursive: true, force: true });
  console.log(JSON.stringify(result));
  process.exit(0);
}

// ---------------------------------------------------------------- listeners role
async function feedReaders() {
  const conn = JSON.parse(arg('conn', '{}'));
  const counts = new Array<number>(O.listen).fill(0);
  const gaps = new Array<number>(O.listen).fill(0);
  const stop = new AbortController();
  for (let k = 0; k < O.listen; k++) {
    const d = planeFor(conn);
    void (async () => {
      for await (const r of d.events(conn.queue, { signal: stop.signal }))
        if (r.kind === 'job') counts[k]!++;
        else if (r.kind === 'gap') gaps[k]!++;
    })().catch(() => {});
  }
  process.on('message', () => process.send!({ counts, gaps, cpu_ms: cpuMs(process.cpuUsage()) }));
  process.on('disconnect', () => process.exit(0));
}

if (O.role === 'worker') await worker();
else if (O.role === 'listeners') await feedReaders();
else await coordinator();
