/**
 * Crashes, with a history checked afterwards (history.ts). The plane here is the Worker served
 * by scripts/serve.mjs on its own persisted state, so it can be killed and restarted on it.
 *
 * - server kill: CRASH_JOBS jobs (300 in CI, 10,000 with `npm run fault`), 4 worker processes;
 *   the plane is SIGKILLed CRASH_KILLS times (3 / 20) at random moments and restarted on the same
 *   state and port. lost = 0, duplicated = 0, unexpected = 0; redelivery delays are printed.
 * - worker kill: a worker is SIGKILLed mid-job WORKER_KILLS times (3 / 100); every job ends
 *   succeeded, none is left running past its lease.
 * - SIGSTOP: a worker stopped past its lease and resumed has its ack refused; the job's success
 *   is the other worker's alone.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { encodeEnvelope, HttpDispatch } from '../../client/local/index.ts';
import { freePort, newToken, type Plane, startPlane } from '../../scripts/plane.mjs';
import { check, readHistory, recorder } from './history.ts';
import { until } from '../support/wait.ts';

const JOBS = Number(process.env.CRASH_JOBS ?? 300);
const KILLS = Number(process.env.CRASH_KILLS ?? 3);
const WORKER_KILLS = Number(process.env.WORKER_KILLS ?? 3);
const WORKER = join(import.meta.dirname, 'crash-worker.ts');
/** Waits a random time: the moment of the stream at which the plane is killed. */
const randomMoment = () => new Promise((r) => setTimeout(r, 300 + Math.random() * 1_200));

let dir: string;
let port: number;
const token: string = newToken('lsk_crash_');
let plane: Plane;
const start = async (migrate: boolean) => {
  plane = await startPlane({
    node: process.execPath,
    env: process.env,
    persistTo: dir,
    port,
    vars: { LAKESHORE_TOKEN: token },
    migrate,
    shards: 3,
  });
};
const url = () => `http://127.0.0.1:${port}`;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'lakeshore-crash-'));
  port = await freePort();
  await start(true);
}, 120_000);

afterAll(async () => {
  await plane?.stop();
  rmSync(dir, { recursive: true, force: true });
});

function worker(ns: string, queue: string, file: string, jobMs: number, leaseMs: number, concurrency = 4): ChildProcess {
  return spawn(
    process.execPath,
    ['--disable-warning=ExperimentalWarning', WORKER, url(), token, ns, queue, file, String(jobMs), String(leaseMs), String(concurrency)],
    { stdio: ['ignore', 'ignore', 'inherit'] },
  );
}

/** Waits (bounded) until a worker's history shows a handler start. */
const started = (file: string) =>
  until(() => existsSync(file) && readFileSync(file, 'utf8').includes('"start"'), `a job start in ${file}`, 30_000);
const exited = (c: ChildProcess) =>
  c.exitCode !== null || c.signalCode !== null ? Promise.resolve() : new Promise<void>((r) => c.once('exit', () => r()));

async function succeededIds(d: HttpDispatch, ids: string[]): Promise<Set<string>> {
  const out = new Set<string>();
  for (const id of ids) if ((await d.get(id))?.state === 'succeeded') out.add(id);
  return out;
}

/** Waits (bounded) until `n` jobs of the queue succeeded; the assertions after it say what is missing. */
const drained = (d: HttpDispatch, queue: string, n: number, ms: number) =>
  until(async () => (await d.count(queue, 'succeeded')) >= n, `${n} jobs succeeded`, ms, 200).catch(() => {});

describe('fault: crashes', () => {
  it(`server kill: ${JOBS} jobs in 3 namespaces on 3 shards, 4 workers, the plane SIGKILLed ${KILLS} times: nothing lost, nothing duplicated`, async () => {
    // Three namespaces, placed on a fresh plane's three shards one each (the fewest-namespaces rule).
    const stamp = Date.now().toString(36);
    const spaces = [0, 1, 2].map((i) => `kill${stamp}s${i}`);
    const ds = spaces.map((namespace) => new HttpDispatch(url(), { token, namespace, retryForMs: 60_000 }));
    const files = [join(dir, `kill${stamp}-producer.jsonl`)];
    const record = recorder(files[0]!);
    // Each kill can cost a job in flight one attempt (its 1 s lease runs out during the restart):
    // allow more attempts than kills, so that every job can still succeed.
    for (const d of ds) await d.configureQueue('q', { maxAttempts: KILLS + 3 });
    const shards = await Promise.all(
      spaces.map(
        async (ns) =>
          (
            (await (await fetch(`${url()}/v1/ns/${ns}/queues/q/stats`, { headers: { authorization: `Bearer ${token}` } })).json()) as {
              shard: string;
            }
          ).shard,
      ),
    );
    expect(new Set(shards).size, `the namespaces' shards: ${shards.join(', ')}`).toBe(3);
    const workers = Array.from({ length: 4 }, (_, i) => {
      files.push(join(dir, `kill${stamp}-w${i}.jsonl`));
      // A lease (1 s) shorter than a restart: jobs caught by a kill are delivered again, and the
      // stale attempt's late ack must be refused.
      return worker(spaces[i % 3]!, 'q', files[i + 1]!, 20, 1_000);
    });
    let next = 0;
    const produce = Promise.all(
      Array.from({ length: 4 }, async () => {
        while (next < JOBS) {
          const n = next++;
          const id = `j${n}`;
          record({ op: 'submit', phase: 'invoke', id });
          try {
            await ds[n % 3]!.submit('q', encodeEnvelope({ fn: 'job' }), { id });
            record({ op: 'submit', phase: 'ok', id });
          } catch {
            record({ op: 'submit', phase: 'fail', id });
          }
        }
      }),
    );
    const outages: number[] = [];
    for (let k = 0; k < KILLS; k++) {
      await randomMoment();
      const down = Date.now();
      await plane.kill();
      await start(false);
      outages.push(Date.now() - down);
    }
    await produce;
    const total = async (state: 'queued' | 'running' | 'succeeded' | 'failed') =>
      (await Promise.all(ds.map((d) => d.count('q', state)))).reduce((a, b) => a + b, 0);
    await until(async () => (await total('succeeded')) >= JOBS, `${JOBS} jobs succeeded`, 60_000, 200).catch(() => {});
    const counts = {
      queued: await total('queued'),
      running: await total('running'),
      succeeded: await total('succeeded'),
      failed: await total('failed'),
    };
    for (const w of workers) w.kill('SIGTERM');
    await Promise.all(workers.map(exited));
    const ids = Array.from({ length: JOBS }, (_, i) => `j${i}`);
    const succeeded = new Set<string>();
    for (const [k, d] of ds.entries())
      for (const id of await succeededIds(
        d,
        ids.filter((_, i) => i % 3 === k),
      ))
        succeeded.add(id);
    const v = check(readHistory(files.filter(existsSync)), succeeded);
    console.log(
      `[server kill] ${JSON.stringify({ jobs: JOBS, kills: KILLS, shards, restart_ms_max: Math.max(0, ...outages), store: counts, ...v })}`,
    );
    expect(v.lost).toBe(0);
    expect(v.duplicated).toBe(0);
    expect(v.unexpected).toBe(0);
    expect(v.acknowledged).toBe(JOBS); // the client rode out every restart
    expect(v.succeeded).toBe(JOBS);
    expect(await total('running')).toBe(0);
  }, 600_000);

  it(`worker kill: a worker SIGKILLed mid-job ${WORKER_KILLS} times leaves no job running past its lease`, async () => {
    const ns = `wkill${Date.now().toString(36)}`;
    const d = new HttpDispatch(url(), { token, namespace: ns });
    const n = WORKER_KILLS + 5;
    // Each kill costs a job one attempt: let attempts outnumber kills, so every job can still succeed.
    await d.configureQueue('q', { maxAttempts: WORKER_KILLS + 3 });
    const files = [join(dir, `${ns}-producer.jsonl`)];
    const record = recorder(files[0]!);
    for (let i = 0; i < n; i++) {
      record({ op: 'submit', phase: 'invoke', id: `k${i}` });
      await d.submit('q', encodeEnvelope({ fn: 'job' }), { id: `k${i}` });
      record({ op: 'submit', phase: 'ok', id: `k${i}` });
    }
    for (let k = 0; k < WORKER_KILLS; k++) {
      const file = join(dir, `${ns}-victim${k}.jsonl`);
      files.push(file);
      const w = worker(ns, 'q', file, 5_000, 1_000, 1);
      await started(file);
      w.kill('SIGKILL'); // mid-job: its claim is held, its handler never finishes
      await exited(w);
    }
    const file = join(dir, `${ns}-survivor.jsonl`);
    files.push(file);
    const survivor = worker(ns, 'q', file, 1, 1_000);
    await drained(d, 'q', n, 120_000);
    survivor.kill('SIGTERM');
    await exited(survivor);
    const v = check(
      readHistory(files.filter(existsSync)),
      await succeededIds(
        d,
        Array.from({ length: n }, (_, i) => `k${i}`),
      ),
    );
    console.log(`[worker kill] ${JSON.stringify({ kills: WORKER_KILLS, jobs: n, ...v })}`);
    expect(v.lost).toBe(0);
    expect(v.duplicated).toBe(0);
    expect(v.succeeded).toBe(n);
    expect(await d.count('q', 'running')).toBe(0);
    expect(v.redelivered).toBeGreaterThanOrEqual(WORKER_KILLS);
  }, 600_000);

  it('a job whose worker never comes back is handed out again after its lease, by a plane restarted since', async () => {
    const ns = `restart${Date.now().toString(36)}`;
    const d = new HttpDispatch(url(), { token, namespace: ns, retryForMs: 60_000 });
    await d.submit('q', encodeEnvelope({ fn: 'job' }), { id: 'r0' });
    const gone = (await d.claim('q', 'gone-for-good', { leaseMs: 3_000 }))!;
    await plane.kill(); // no alarm, no waiter, no worker survives this
    await start(false);
    // A claim on the restarted plane waits, and gets the job as its second attempt, once the lease ran out.
    const again = await d.claim('q', 'other', { waitMs: 30_000 });
    expect(again).toMatchObject({ id: 'r0', attempt: 2 });
    expect(Date.now()).toBeGreaterThanOrEqual(gone.leaseUntil);
    await expect(d.ack('r0', 'gone-for-good', { attempt: 1 })).rejects.toMatchObject({ code: 'conflict' });
    await d.ack('r0', 'other', { attempt: 2 });
    expect((await d.get('r0'))!.state).toBe('succeeded');
  }, 120_000);

  it('SIGSTOP past the lease, then SIGCONT: the stopped worker’s ack is refused', async () => {
    const ns = `stop${Date.now().toString(36)}`;
    const d = new HttpDispatch(url(), { token, namespace: ns });
    await d.submit('q', encodeEnvelope({ fn: 'job' }), { id: 's0' });
    const [fa, fb] = [join(dir, `${ns}-a.jsonl`), join(dir, `${ns}-b.jsonl`)];
    const a = worker(ns, 'q', fa, 1_500, 1_000);
    await started(fa);
    a.kill('SIGSTOP');
    const b = worker(ns, 'q', fb, 1, 1_000);
    await drained(d, 'q', 1, 30_000);
    a.kill('SIGCONT');
    await until(
      () => readHistory([fa]).some((e) => e.op === 'ack' && e.attempt === 1),
      'the resumed worker to answer its first attempt',
      30_000,
      50,
    );
    for (const w of [a, b]) w.kill('SIGTERM');
    await Promise.all([exited(a), exited(b)]);
    const h = readHistory([fa, fb]);
    const acks = h.filter((e) => e.op === 'ack');
    const ok = acks.filter((e) => e.phase === 'ok');
    expect(ok).toHaveLength(1); // one success, and it is B's
    expect(ok[0]!.pid).toBe(b.pid);
    // A's stale ack is refused. (A's other claim, still parked while it was stopped, may have
    // taken the job again after its lease ran out; that attempt lost its lease too.)
    const mine = acks.filter((e) => e.pid === a.pid);
    expect(mine.map((e) => e.phase)).toEqual(mine.map(() => 'fail'));
    expect(mine.map((e) => e.attempt)).toContain(1);
    expect((await d.get('s0'))!.attempt).toBe(ok[0]!.attempt);
  }, 120_000);
});
