/**
 * Workers outlive a plane outage (docs/cli.md, `worker start`): a Node worker and a supervised
 * Python one serve their queues while a producer submits, the plane is stopped for OUTAGE_S
 * seconds (20 in `npm test`, 60 with `npm run fault`: longer than any client's bounded retry of
 * 15 s) and started again on its state. Neither worker process exits; each says once that the
 * plane went away and once that it is back; every job succeeds, checked from the history
 * (test/fault/history.ts: no acknowledged submit lost, none succeeding twice). Then the plane
 * goes away again and both are asked to stop: each exits at once, not when the plane is back.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, expect, it } from 'vitest';
import { encodeEnvelope, HttpDispatch } from '../../client/local/index.ts';
import { freePort, newToken, startPlane } from '../../scripts/plane.mjs';
import { check, readHistory, recorder } from './history.ts';
import { until } from '../support/wait.ts';

const OUTAGE_S = Number(process.env.OUTAGE_S ?? 20);
const N = 120;
const BIN = resolve(import.meta.dirname, '..', '..', 'bin', 'lakeshore.mjs');
const HANDLERS = resolve(import.meta.dirname, '..', 'fixtures', 'outage-handlers.mjs');

const dir = mkdtempSync(join(tmpdir(), 'lakeshore-outage-'));
const children: ChildProcess[] = [];
afterAll(() => {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  rmSync(dir, { recursive: true, force: true });
});

it(`a Node and a Python worker outlive the plane stopped for ${OUTAGE_S} s: neither exits, each job succeeds once`, async () => {
  const port = await freePort();
  const token = newToken('lsk_outage_');
  const start = (migrate: boolean) =>
    startPlane({
      node: process.execPath,
      env: process.env,
      persistTo: join(dir, 'state'),
      port,
      vars: { LAKESHORE_TOKEN: token },
      migrate,
    });
  let plane = await start(true);
  const ns = `outage${Date.now().toString(36)}`;
  const env = {
    ...process.env,
    LAKESHORE_URL: plane.url,
    LAKESHORE_TOKEN: token,
    LAKESHORE_NAMESPACE: ns,
    LAKESHORE_PYTHON: process.env.LAKESHORE_PYTHON,
  };
  const py = join(dir, 'py');
  mkdirSync(py, { recursive: true });
  writeFileSync(
    join(py, 'outage_jobs.py'),
    [
      'import json, os, time',
      'import lakeshore as ls',
      'def job(i):',
      '    j = ls.current_job()',
      '    with open(os.environ["OUTAGE_HISTORY"], "a") as f:',
      '        f.write(json.dumps({"t": int(time.time() * 1000), "op": "start", "id": j.id, "attempt": j.attempt, "pid": os.getpid()}) + "\\n")',
      '    return i',
      '',
    ].join('\n'),
  );
  const files = { producer: join(dir, 'producer.jsonl'), node: join(dir, 'node.jsonl'), python: join(dir, 'python.jsonl') };
  const logs = { node: '', python: '' };
  const worker = (kind: 'node' | 'python', args: string[]) => {
    const c = spawn(process.execPath, [BIN, 'worker', 'start', ...args], {
      env: { ...env, OUTAGE_HISTORY: files[kind] },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    c.stderr!.on('data', (d) => (logs[kind] += d));
    children.push(c);
    return c;
  };
  const node = worker('node', ['--queue', 'nq', '--module', HANDLERS, '--concurrency', '4']);
  const python = worker('python', ['--runtime', 'python', '--queue', 'pq', '--root', py]);

  const d = new HttpDispatch(plane.url, { token, namespace: ns, retryForMs: (OUTAGE_S + 60) * 1000 });
  const record = recorder(files.producer);
  // The outage falls mid-stream: the producer submits the first half, waits until the plane is
  // gone, and submits the rest into the outage (its client retries until the plane is back).
  let planeGone!: () => void;
  const gone = new Promise<void>((r) => (planeGone = r));
  const produced = (async () => {
    for (let i = 0; i < N; i++) {
      if (i === N / 2) await gone;
      const q = i % 2 ? 'pq' : 'nq';
      const id = `o${i}`;
      const envelope = encodeEnvelope(q === 'pq' ? { fn: 'job', module: 'outage_jobs:job', args: [i] } : { fn: 'job', args: [i] });
      record({ op: 'submit', phase: 'invoke', id });
      await d.submit(q, envelope, { id }).then(
        () => record({ op: 'submit', phase: 'ok', id }),
        () => record({ op: 'submit', phase: 'fail', id }),
      );
    }
  })();
  // Both workers have run jobs; then the plane goes away for OUTAGE_S.
  await until(() => existsSync(files.node) && existsSync(files.python), 'both workers running jobs', 60_000);
  await plane.kill();
  const down = Date.now();
  planeGone();
  await until(() => Date.now() - down >= OUTAGE_S * 1000, `the outage of ${OUTAGE_S} s`, OUTAGE_S * 1000 + 5_000, 500);
  expect([node.exitCode, python.exitCode], 'no worker exits while the plane is away').toEqual([null, null]);
  plane = await start(false);
  await produced;
  await until(
    async () => (await d.count('nq', 'succeeded')) + (await d.count('pq', 'succeeded')) === N,
    `${N} jobs succeeded`,
    120_000,
    500,
  );
  expect([node.exitCode, python.exitCode], 'no worker exited').toEqual([null, null]);

  const succeeded = new Set<string>();
  for (let i = 0; i < N; i++) if ((await d.get(`o${i}`))?.state === 'succeeded') succeeded.add(`o${i}`);
  const v = check(readHistory(Object.values(files).filter(existsSync)), succeeded);
  console.log(`[outage] ${JSON.stringify({ outage_s: OUTAGE_S, ...v, lost_ids: v.lost_ids.slice(0, 5) })}`);
  expect(v.lost).toBe(0);
  expect(v.unexpected).toBe(0);
  expect(v.succeeded).toBe(N);
  // No success twice: the Node worker says each job's outcome once its ack landed ("o12: succeeded").
  const acked = [...logs.node.matchAll(/^\[lakeshore worker\] (o\d+): succeeded$/gm)].map((m) => m[1]!);
  expect(acked.length, 'the Node worker said its outcomes (else this check says nothing)').toBeGreaterThan(N / 4);
  expect(acked.length - new Set(acked).size, 'jobs whose success two attempts of the Node worker had acked').toBe(0);
  // Said once each way, not once per try or per request.
  for (const [kind, log] of Object.entries(logs)) {
    expect(log.match(/cannot reach the plane at/g)?.length, `${kind}: the plane went away, said once:\n${log}`).toBe(1);
    expect(log.match(/back after/g)?.length, `${kind}: the plane is back, said once:\n${log}`).toBe(1);
    expect(log, kind).not.toMatch(/Traceback|exited \d|starting it again/);
  }
  // Asked to stop while the plane is away, each exits at once (docs/cli.md), code 0: it does not
  // wait for a plane that may not come back. The Node worker holds a running job then: its drain
  // would wait for the job, and the job's nack for the plane; the job goes back to its queue by lease.
  await d.submit('nq', encodeEnvelope({ fn: 'hold', args: [] }), { id: 'held' });
  await until(async () => (await d.get('held'))?.state === 'running', 'the Node worker running the held job');
  await d.close();
  await plane.kill();
  await until(
    () => Object.values(logs).every((log) => log.match(/cannot reach the plane at/g)?.length === 2),
    'both workers to see the plane go away again',
    30_000,
  );
  const asked = Date.now();
  for (const c of [node, python]) c.kill('SIGTERM');
  await until(() => node.exitCode !== null && python.exitCode !== null, 'both workers to exit at once, the plane away', 10_000);
  expect([node.exitCode, python.exitCode], 'both exit 0 when asked to stop during an outage').toEqual([0, 0]);
  expect(Date.now() - asked).toBeLessThan(10_000);
  expect(logs.node).toMatch(/SIGTERM while the plane is away: exiting now/);
}, 300_000);
