/** The worker runtime and the CLI, driven as a user would: separate processes, on both planes. */
import { spawn } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { afterEach, describe, expect, it } from 'vitest';
import { cli, HANDLERS, planeEnv, start, stop, type PlaneKind, type Running } from './setup/cli.ts';
import { until } from '../support/wait.ts';
import { allExited, alive, descendants } from '../support/processes.ts';
import { tempDir } from '../support/tmp.ts';
import { freePort } from '../../scripts/plane.mjs';
import { HttpDispatch } from '../../client/local/index.ts';
import { noInvocation } from '../../src/core/errors.ts';

const marker = () => join(tempDir('lakeshore-mark-'), 'marks.log');
const lines = (file: string) => (existsSync(file) ? readFileSync(file, 'utf8').trim().split('\n').filter(Boolean) : []);

describe.each<PlaneKind>(['local', 'edge'])('lakeshore CLI on the %s plane', (kind) => {
  const running: Running[] = [];
  const worker = (env: NodeJS.ProcessEnv, ...extra: string[]) => {
    const w = start(['worker', 'start', '--queue', 'jobs', '--module', HANDLERS, ...extra], env);
    running.push(w);
    return w;
  };
  afterEach(async () => {
    await Promise.all(running.splice(0).map((r) => stop(r)));
  });

  it('`lakeshore tail` writes raw output as it came, a character split between frames whole, and ends its line', async () => {
    const env = planeEnv(kind);
    const id = (await cli(['submit', 'jobs', 'chat'], env)).stdout.trim();
    worker(env);
    const tail = await cli(['tail', id], env);
    expect(tail.stdout).toBe(`── attempt 1 ──\nHello, wörld\n1\n── end ──\n${id}: succeeded\n`);
    const frames = (await cli(['--json', 'tail', id], env)).stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    expect(frames.filter((f) => f.kind === 'CHUNK').length).toBeGreaterThan(1); // the ö did travel in two frames
  });

  it('streams a generator job’s frames to `lakeshore tail` before the job ends', async () => {
    const env = planeEnv(kind);
    // The job yields its four values, then stays running until the test creates its gate file.
    const gate = join(tempDir('lakeshore-gate-'), 'open');
    const sub = await cli(['submit', 'jobs', 'countUntil', JSON.stringify([4, gate])], env);
    expect(sub.code).toBe(0);
    const id = sub.stdout.trim();
    const tail = start(['--json', 'tail', id], env);
    running.push(tail);
    worker(env);
    // Every value is on the tail's stdout while the job still runs, and the tail has not ended.
    await until(() => tail.stdout().includes('"body":3'), 'the last value in tail');
    expect((await cli(['--json', 'get', id], env)).stdout).toContain('"state":"running"');
    // A missing id is said as the plane says it, whichever command asks.
    const missing = await cli(['get', 'no-such-id'], env);
    expect([missing.code, missing.stderr.trim()]).toEqual([3, `lakeshore: ${noInvocation('no-such-id')}`]);
    // The text view shows the call as the dashboard does, whole, then each other field its envelope sets.
    const shownCall = (await cli(['get', id], env)).stdout.split('\n');
    expect(shownCall.find((l) => l.startsWith('call '))).toBe(`call         countUntil(4, ${JSON.stringify(gate)})`);
    expect(shownCall.find((l) => l.startsWith('traceparent '))).toMatch(/^traceparent +00-[0-9a-f]{32}-[0-9a-f]{16}-01$/);
    expect(shownCall.some((l) => /^(module|code|origin) /.test(l))).toBe(false);
    expect(tail.child.exitCode).toBe(null);
    writeFileSync(gate, '');
    expect(await tail.exited).toBe(0);
    const frames = tail
      .stdout()
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    expect(frames.map((f) => f.kind)).toEqual(['BEGIN', 'VALUE', 'VALUE', 'VALUE', 'VALUE', 'END']);
    expect(frames.filter((f) => f.kind === 'VALUE').map((f) => f.body)).toEqual([0, 1, 2, 3]);
    const res = await cli(['--json', 'result', id], env);
    expect(JSON.parse(res.stdout)).toEqual({ id, state: 'succeeded', result: 4 });
  });

  it('retries a failing job while attempt <= retries, and counts the attempts', async () => {
    const env = planeEnv(kind);
    const ok = (await cli(['submit', 'jobs', 'flaky', '[3]'], env)).stdout.trim();
    worker(env, '--retries', '2');
    const res = await cli(['--json', 'result', ok, '--timeout', '30'], env);
    expect(JSON.parse(res.stdout)).toMatchObject({ state: 'succeeded', result: 3 });
    expect(JSON.parse((await cli(['--json', 'get', ok], env)).stdout).attempt).toBe(3);
    const bad = (await cli(['submit', 'jobs', 'flaky', '[9]'], env)).stdout.trim();
    const failed = await cli(['--json', 'result', bad, '--timeout', '30'], env);
    expect(failed.code).toBe(1);
    expect(JSON.parse(failed.stdout)).toMatchObject({ state: 'failed', error: { message: 'attempt 3 fails' } });
    expect(JSON.parse((await cli(['--json', 'get', bad], env)).stdout).attempt).toBe(3);
    // As text, the error reads as a person reads one: its type and message, then its stack a line each.
    const shown = (await cli(['get', bad], env)).stdout.split('\n');
    const error = shown.slice(shown.findIndex((l) => l.startsWith('error ')));
    expect(error[0]).toMatch(/^error +\S*Error: attempt 3 fails$/);
    expect(error[1]).toMatch(/^ {13}(Traceback|\s*at )/);
    expect(error.slice(1).some((l) => l.trim() === error[0]!.replace(/^error +/, ''))).toBe(false);
    expect(error.some((l) => /^ {13}.*flaky/.test(l))).toBe(true);
  });

  it('hands a job killed with SIGKILL mid-run to another worker after its lease, and it succeeds exactly once', async () => {
    const env = planeEnv(kind);
    const mark = marker();
    const id = (await cli(['submit', 'jobs', 'slow', JSON.stringify([1500, mark])], env)).stdout.trim();
    const a = worker(env, '--lease-ms', '1000');
    await until(() => lines(mark).length === 1, 'the job to start');
    await stop(a, 'SIGKILL');
    // The second worker's lease is long: the hand-off is the first lease's, and a loaded machine's
    // late heartbeat must not spend the job's last attempt.
    worker(env, '--lease-ms', '10000');
    const res = await cli(['--json', 'result', id, '--timeout', '30'], env);
    expect(JSON.parse(res.stdout)).toMatchObject({ state: 'succeeded', result: 'slept' });
    const marks = lines(mark);
    expect(marks.filter((l) => l.startsWith('start'))).toHaveLength(2);
    expect(marks.filter((l) => l.startsWith('done'))).toHaveLength(1);
    expect(JSON.parse((await cli(['--json', 'get', id], env)).stdout).attempt).toBe(2);
  });

  it('drains the running job on SIGTERM and exits 0', async () => {
    const env = planeEnv(kind);
    const mark = marker();
    const id = (await cli(['submit', 'jobs', 'slow', JSON.stringify([800, mark])], env)).stdout.trim();
    const w = worker(env);
    await until(() => lines(mark).length === 1, 'the job to start');
    w.child.kill('SIGTERM');
    expect(await w.exited).toBe(0);
    expect(lines(mark).filter((l) => l.startsWith('done'))).toHaveLength(1);
    expect(JSON.parse((await cli(['--json', 'result', id], env)).stdout).state).toBe('succeeded');
  });

  it('a second SIGTERM puts the running job back in its queue now and exits 0', async () => {
    const env = planeEnv(kind);
    const mark = marker();
    const id = (await cli(['submit', 'jobs', 'slow', JSON.stringify([120_000, mark])], env)).stdout.trim();
    // A grace longer than the test: only the second signal can end the job's run.
    const w = worker(env, '--grace-ms', '600000');
    await until(() => lines(mark).length === 1, 'the job to start');
    w.child.kill('SIGTERM');
    await until(() => w.stderr().includes('SIGTERM: draining'), 'the worker to drain');
    w.child.kill('SIGTERM');
    expect(await w.exited).toBe(0);
    expect(w.stderr()).toContain('SIGTERM again: stopping now');
    expect(w.stderr()).not.toContain('not back within 5 s'); // its nack went out; the handler it left did not hold it open
    // Back now, not when its lease (30 s) runs out; the attempt it ran is charged.
    expect(JSON.parse((await cli(['--json', 'get', id], env)).stdout)).toMatchObject({ state: 'queued', attempt: 1 });
  });

  it('aborts a cancelled job’s AbortSignal, and the worker serves on', async () => {
    const env = planeEnv(kind);
    const mark = marker();
    const id = (await cli(['submit', 'jobs', 'waitForCancel', JSON.stringify([mark])], env)).stdout.trim();
    // A lease the worker's heartbeats keep under a loaded machine: one that ran out (900 ms did once,
    // in CI) hands the job back, and its worker is told it lost it, not that it was cancelled.
    worker(env, '--lease-ms', '3000');
    await until(() => lines(mark).length === 1, 'the job to start');
    expect((await cli(['cancel', id], env)).code).toBe(0);
    await until(() => lines(mark).some((l) => l.startsWith('aborted')), 'the handler to see its signal');
    expect(lines(mark)[1]).toMatch(/cancelled/);
    const res = await cli(['--json', 'result', id], env);
    expect(res.code).toBe(5);
    expect(JSON.parse(res.stdout).state).toBe('cancelled');
    const next = (await cli(['submit', 'jobs', 'add', '[2, 3]'], env)).stdout.trim();
    expect(JSON.parse((await cli(['--json', 'result', next, '--timeout', '30'], env)).stdout).result).toBe(5);
  });

  it('operates a queue: settings, a delayed and a failed job, retry, pause and resume, and a cron schedule', async () => {
    const env = planeEnv(kind);
    const q = JSON.parse(
      (await cli(['--json', 'queue', 'ops', '--max-attempts', '1', '--max-running', '4', '--backoff', '1000,2,8000'], env)).stdout,
    );
    expect(q).toMatchObject({
      queue: 'ops',
      paused: false,
      settings: { maxAttempts: 1, maxRunning: 4, retryBackoff: { initialMs: 1000, factor: 2, maxMs: 8000, jitter: 0 } },
    });
    expect(JSON.parse((await cli(['--json', 'queue', 'ops', '--max-running', 'none'], env)).stdout).settings).toMatchObject({
      maxRunning: null,
      maxAttempts: 1,
    });
    const later = (await cli(['submit', 'ops', 'add', '[1, 2]', '--delay-ms', '600000'], env)).stdout.trim();
    expect(JSON.parse((await cli(['--json', 'get', later], env)).stdout)).toMatchObject({ state: 'delayed', run_at: expect.any(Number) });
    const id = (await cli(['submit', 'ops', 'boom'], env)).stdout.trim();
    expect((await cli(['worker', 'once', '--queue', 'ops', '--module', HANDLERS], env)).code).toBe(0);
    expect((await cli(['result', id], env)).code).toBe(1); // failed: its one attempt used
    expect((await cli(['retry', id], env)).code).toBe(0);
    expect(JSON.parse((await cli(['--json', 'get', id], env)).stdout)).toMatchObject({ state: 'queued', attempt: 1 });
    expect((await cli(['retry', id], env)).code).not.toBe(0); // only a failed job is retried
    // stats: the counts, and the database against its storage budget (its shard, or the local file).
    const stats = (await cli(['stats', 'ops'], env)).stdout;
    expect(stats).toMatch(/^ops\s+1\s+1\s+0/m);
    expect(stats).toMatch(
      kind === 'edge'
        ? /^storage: shard DB(_\d)? holds \d+(\.\d)? [KM]B of 10\.0 GB/m
        : /^storage: the local file holds \d+(\.\d)? [KM]B of 10\.0 GB/m,
    );
    expect(JSON.parse((await cli(['--json', 'stats', 'ops'], env)).stdout.trim().split('\n').pop()!).storage).toMatchObject({
      limitBytes: 10_000_000_000,
      full: false,
    });
    expect((await cli(['pause', 'ops'], env)).code).toBe(0);
    expect((await cli(['worker', 'once', '--queue', 'ops', '--module', HANDLERS], env)).code).toBe(0); // nothing handed out while paused
    expect(JSON.parse((await cli(['--json', 'get', id], env)).stdout).state).toBe('queued');
    expect((await cli(['resume', 'ops'], env)).code).toBe(0);
    expect(
      (
        await cli(
          ['--json', 'schedule', 'set', 'ops', 'hourly', '--cron', '0 * * * *', '--fn', 'add', '--args', '[1,1]', '--kwargs', '{"k":2}'],
          env,
        )
      ).code,
    ).toBe(0);
    // A listing says what each tick submits.
    const listed = JSON.parse((await cli(['--json', 'schedule', 'list', 'ops'], env)).stdout);
    expect(listed.schedules).toEqual([
      expect.objectContaining({
        name: 'hourly',
        cron: '0 * * * *',
        nextAt: expect.any(Number),
        call: { fn: 'add', args: [1, 1], kwargs: { k: 2 } },
      }),
    ]);
    expect((await cli(['schedule', 'list', 'ops'], env)).stdout).toMatch(/^hourly +0 \* \* \* \* +UTC +add\(1, 1, k=2\) {2}next /);
    // A local file has no process of its own to fire ticks: the CLI says what does.
    const daily = await cli(['schedule', 'set', 'ops', 'daily', '--cron', '0 9 * * *', '--fn', 'add'], env);
    expect(daily.stderr).toBe(
      kind === 'local'
        ? 'lakeshore: on the local plane a tick submits while a process has the file open: a worker of ops (lakeshore worker start --queue ops) fires them\n'
        : '',
    );
    expect((await cli(['schedule', 'rm', 'ops', 'daily'], env)).code).toBe(0);
    if (kind === 'local') {
      // A push queue's ticks go out through its pusher, which is what fires them.
      expect((await cli(['queue', 'ops-pushed', '--push-url', 'http://127.0.0.1:9/'], env)).code).toBe(0);
      const pushed = await cli(['schedule', 'set', 'ops-pushed', 'daily', '--cron', '0 9 * * *', '--fn', 'add'], env);
      expect(pushed.stderr).toBe(
        'lakeshore: on the local plane a tick submits while a process has the file open: its pusher (lakeshore push ops-pushed) fires them\n',
      );
      expect((await cli(['schedule', 'rm', 'ops-pushed', 'daily'], env)).code).toBe(0);
    }
    if (kind === 'local') {
      // One another plane wrote that this one cannot read (its next tick moved to never), with bytes that are no call.
      const db = new DatabaseSync(join(env.LAKESHORE_HOME!, 'dispatch.sqlite'));
      db.prepare(
        `INSERT INTO schedules (ns, queue, name, cron, envelope, priority, next_at, created_at, updated_at) VALUES (?, 'ops', 'odd', '0 0 1W * *', X'00', 0, ?, 1, 1)`,
      ).run(env.LAKESHORE_NAMESPACE!, Number.MAX_SAFE_INTEGER);
      db.close();
      expect((await cli(['schedule', 'list', 'ops'], env)).stdout).toMatch(
        /^odd +0 0 1W \* \* +UTC +\(1 bytes, not a call\) {2}next never \(a cron this plane cannot read: set it again\)$/m,
      );
      expect((await cli(['schedule', 'rm', 'ops', 'odd'], env)).code).toBe(0);
    }
    const refused = await cli(['schedule', 'set', 'ops', 'odd', '--cron', '0 * * * *', '--fn', 'add', '--kwargs', '[1]'], env);
    expect([refused.code, refused.stderr]).toEqual([2, expect.stringContaining('--kwargs must be a JSON object of keyword arguments')]);
    expect((await cli(['schedule', 'rm', 'ops', 'hourly'], env)).code).toBe(0);
    expect((await cli(['schedule', 'set', 'ops', 'bad', '--cron', 'whenever', '--fn', 'add'], env)).code).not.toBe(0);
    // A push target's secret shows once; after that the queue says where a new one comes from.
    const made = (await cli(['queue', 'ops-push', '--push-url', 'http://127.0.0.1:9/'], env)).stdout;
    expect(made).toMatch(/^push secret {6}whsec_\S+$/m);
    const again = (await cli(['queue', 'ops-push', '--push-url', 'http://127.0.0.1:9/'], env)).stdout;
    expect(again).not.toMatch(/whsec_/);
    expect(again).toMatch(/^push secret {6}not shown again .*--rotate-push-secret makes a new one$/m);
    expect((await cli(['queue', 'ops-push', '--push-url', 'none'], env)).stdout).not.toMatch(/push secret/);
  });

  it("`lakeshore ls` pages through a queue's jobs in one state, and says how to get the next page", async () => {
    const env = planeEnv(kind);
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) ids.push((await cli(['submit', 'listed', 'count', '[1]'], env)).stdout.trim());
    const first = JSON.parse((await cli(['--json', 'ls', 'listed', '--limit', '2'], env)).stdout);
    expect(first.items.map((j: { id: string }) => j.id)).toEqual(ids.slice(0, 2));
    expect(first.cursor).toEqual(expect.any(String));
    const human = await cli(['ls', 'listed', '--limit', '2'], env);
    expect(human.stdout).toContain(`more: lakeshore ls listed --state queued --cursor ${first.cursor}`);
    const rest = JSON.parse((await cli(['--json', 'ls', 'listed', '--cursor', first.cursor], env)).stdout);
    expect(rest).toMatchObject({ items: [{ id: ids[2], state: 'queued' }], cursor: null });
    const bad = await cli(['ls', 'listed', '--state', 'sideways'], env);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('--state must be one of');
  });

  it('`lakeshore stream-url` prints a URL a browser opens with no other credential (edge plane only)', async () => {
    const env = planeEnv(kind);
    const id = (await cli(['submit', 'jobs', 'count', '[1, 0]'], env)).stdout.trim();
    const r = await cli(['stream-url', id, '--ttl', '60'], env);
    if (kind === 'local') {
      expect(r.code).toBe(2);
      expect(r.stderr).toContain('edge plane');
      return;
    }
    expect(r.code, r.stderr).toBe(0);
    const url = r.stdout.trim();
    expect(url).toMatch(new RegExp(`/invocations/${id}/journal\\?access_token=lss_`));
    expect((await cli(['cancel', id], env)).code).toBe(0);
    const res = await fetch(url, { headers: { accept: 'text/event-stream' } });
    expect(res.status).toBe(200);
    expect(await res.text()).toContain('event: end');
  });

  it('`delete` removes a finished job, refuses one not finished; `purge` asks first, then deletes a state', async () => {
    const env = planeEnv(kind);
    const failed: string[] = [];
    for (let i = 0; i < 3; i++) failed.push((await cli(['submit', 'jobs', 'boom', '["no"]', '--max-attempts', '1'], env)).stdout.trim());
    const ok = (await cli(['submit', 'jobs', 'add', '[1, 2]'], env)).stdout.trim();
    worker(env);
    expect(JSON.parse((await cli(['--json', 'result', ok, '--timeout', '30'], env)).stdout)).toMatchObject({ result: 3 });
    for (const id of failed) expect((await cli(['result', id, '--timeout', '30'], env)).code).toBe(1);
    const waiting = (await cli(['submit', 'jobs', 'add', '[1, 2]', '--delay-ms', '600000'], env)).stdout.trim();

    expect((await cli(['delete', ok], env)).stdout).toBe(`${ok}: deleted\n`);
    expect((await cli(['get', ok], env)).code).toBe(3);
    const refused = await cli(['delete', waiting], env);
    expect(refused.code).toBe(7);
    expect(refused.stderr).toContain(
      'is delayed; only a finished invocation (succeeded, failed or cancelled) can be deleted: cancel it first',
    );

    // No terminal to ask on: it says how to confirm, and deletes nothing.
    const unasked = await cli(['purge', 'jobs', '--state', 'failed'], env);
    expect(unasked.code).toBe(2);
    expect(unasked.stderr).toContain(
      'delete 3 failed job(s) of queue jobs, with their frames? This cannot be undone. Not asked: stdin is not a terminal; pass --yes to confirm',
    );
    expect((await cli(['--json', 'ls', 'jobs', '--state', 'failed'], env)).stdout).toContain(failed[0]!);
    const purged = await cli(['purge', 'jobs', '--state', 'failed', '--yes'], env);
    expect(purged.stdout).toBe('jobs: 3 job(s) deleted\n');
    expect(JSON.parse((await cli(['--json', 'ls', 'jobs', '--state', 'failed'], env)).stdout).items).toEqual([]);
    expect((await cli(['purge', 'jobs', '--state', 'finished', '--yes'], env)).stdout).toContain('nothing to purge');
    expect(JSON.parse((await cli(['--json', 'get', waiting], env)).stdout).state).toBe('delayed');
    expect((await cli(['purge', 'jobs', '--state', 'queued', '--yes'], env)).code).toBe(2);
  });

  it('`result` says once when no worker claims from the job’s queue, and when the queue is paused', async () => {
    const env = { ...planeEnv(kind), LAKESHORE_QUIET_QUEUE_MS: '1500' };
    const id = (await cli(['submit', 'nobody', 'add', '[1, 2]'], env)).stdout.trim();
    const r = await cli(['result', id, '--timeout', '8'], env);
    expect(r.code).toBe(4);
    const said = r.stderr.split('\n').filter((l) => l.includes('no worker has claimed'));
    expect(said).toEqual([
      `lakeshore: no worker has claimed from queue nobody in 2 s (${id} is still queued): is one serving it? \`lakeshore worker start --queue nobody ...\`; \`lakeshore workers\` lists those heard from`,
    ]);
    expect((await cli(['pause', 'held'], env)).code).toBe(0);
    const held = (await cli(['submit', 'held', 'add', '[1, 2]'], env)).stdout.trim();
    const p = await cli(['result', held, '--timeout', '5'], env);
    expect(p.stderr).toContain(`queue held is paused: no worker gets ${held} until \`lakeshore resume held\``);
  });

  it('`lakeshore events` shows what every process does, and `lakeshore workers` who serves (edge plane: the local plane knows its own process’s workers)', async () => {
    const env = planeEnv(kind);
    const feed = start(['--json', 'events', 'jobs'], env);
    const words = start(['events', 'jobs'], env);
    running.push(feed, words);
    await until(
      async () => {
        // Both feeds are connected once a submit's record reaches them.
        await cli(['submit', 'jobs', 'add', '[0, 0]'], env);
        return feed.stdout().includes('"status":"queued"') && words.stdout().includes(' queued');
      },
      'the feeds connected',
      40_000,
    ); // two CLI processes starting on a loaded machine
    const w = worker(env, '--worker-id', 'cli-test-worker');
    const id = (await cli(['submit', 'jobs', 'add', '[2, 3]'], env)).stdout.trim();
    expect(JSON.parse((await cli(['--json', 'result', id, '--timeout', '30'], env)).stdout).result).toBe(5);
    await until(() => feed.stdout().includes(`"id":"${id}","queue":"jobs","status":"succeeded"`), 'the succeeded record');
    const records = feed
      .stdout()
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    expect(records.filter((e) => e.id === id).map((e) => e.status)).toEqual(['queued', 'running', 'succeeded']);
    expect(records).toContainEqual(expect.objectContaining({ kind: 'worker', worker_id: 'cli-test-worker', status: 'started' }));
    // In words, one line per record.
    await until(() => words.stdout().includes(`job ${id} succeeded`), 'the succeeded line');
    expect(words.stdout()).toMatch(new RegExp(`^\\S+Z  jobs  job ${id} succeeded \\(attempt 1\\) by cli-test-worker$`, 'm'));
    expect(w.child.exitCode).toBe(null);
    if (kind === 'local') {
      expect((await cli(['workers'], env)).stdout).toContain('no worker heard from lately by this process');
      return;
    }
    const seen = (await cli(['--json', 'workers'], env)).stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    expect(seen).toContainEqual(expect.objectContaining({ worker_id: 'cli-test-worker', status: 'active', queues: ['jobs'] }));
    const human = await cli(['workers'], env);
    expect(human.stdout).toMatch(/^WORKER\s+STATUS\s+QUEUES\s+HOST\s+SLOTS\s+LAST HEARD\s+HOLDING$/m);
    expect(human.stdout).toMatch(/^cli-test-worker\s+active\s+jobs\s+/m);
  });

  it('`worker once` on an empty queue exits 0 after its short wait (2 s), so it runs from cron', async () => {
    const env = planeEnv(kind);
    const t0 = Date.now();
    const r = await cli(['worker', 'once', '--queue', 'empty', '--module', HANDLERS], env);
    expect(r.code).toBe(0);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(2_000);
    expect(Date.now() - t0).toBeLessThan(30_000);
  });

  it('`result` of several ids prints each as its job ends, and exits with the worst end', async () => {
    const env = planeEnv(kind);
    const gate = join(tempDir('lakeshore-gate-'), 'open');
    const id = async (...args: string[]) => (await cli(['submit', 'jobs', ...args], env)).stdout.trim();
    const held = await id('countUntil', JSON.stringify([1, gate]));
    const quick = await id('add', '[2,3]');
    const bad = await id('boom', '["no such city"]');
    worker(env, '--concurrency', '4');
    const waiting = start(['--json', 'result', held, quick, bad, 'no-such-id', quick, '--timeout', '60'], env);
    running.push(waiting);
    const said = () =>
      waiting
        .stdout()
        .trim()
        .split('\n')
        .filter(Boolean)
        .map((l) => JSON.parse(l));
    // The three that end (or are missing) first are printed while the held job still runs.
    await until(() => said().length === 3, 'three ends printed');
    expect(said()).toEqual(
      expect.arrayContaining([
        { id: quick, state: 'succeeded', result: 5 },
        expect.objectContaining({
          id: bad,
          state: 'failed',
          error: expect.objectContaining({ message: expect.stringContaining('no such city') }),
        }),
        { id: 'no-such-id', error: { code: 'not_found', message: noInvocation('no-such-id') } },
      ]),
    );
    expect(waiting.child.exitCode).toBe(null);
    writeFileSync(gate, '');
    expect(await waiting.exited).toBe(1); // one failed: the worst end
    expect(said()).toHaveLength(4); // an id given twice is printed once
    expect(said()[3]).toEqual({ id: held, state: 'succeeded', result: 1 });
    // A job still delayed when the wait is over is said to have timed out (exit 4); all succeeded is 0.
    const late = await id('add', '[1,1]', '--delay-ms', '600000');
    const timed = await cli(['result', quick, late, '--timeout', '0.5'], env);
    expect([timed.code, timed.stdout.split('\n')[1]]).toEqual([4, `${late}  timed out: ${late} is still delayed after 0.5 s`]);
    // `get` of several ids: a line each, as `ls` shows a job, with its queue; a missing one said (exit 3).
    const rows = await cli(['get', quick, 'no-such-id', bad], env);
    expect(rows.code).toBe(3);
    expect(
      rows.stdout
        .trim()
        .split('\n')
        .map((l) => l.split('  ').slice(0, 4)),
    ).toEqual([
      [quick, 'jobs', 'succeeded', 'attempt 1'],
      ['no-such-id', 'not found'],
      [bad, 'jobs', 'failed', expect.stringMatching(/^attempt \d$/)],
    ]);
    const both = await cli(['result', quick, held], env);
    expect([both.code, both.stdout.trim().split('\n').sort()]).toEqual([0, [`${quick}  5`, `${held}  1`].sort()]);
  });

  it('answers usage errors and unknown ids with their exit codes', async () => {
    const env = planeEnv(kind);
    expect((await cli(['submit', 'jobs', 'add', '[1,'], env)).code).toBe(2);
    const missing = await cli(['get', 'no-such-id'], env);
    expect(missing.code).toBe(3);
    // Said on stderr, as every other command's failure; stdout stays empty for scripts.
    expect(missing.stdout).toBe('');
    expect(missing.stderr).toContain('no-such-id');
    // An empty queue name is named, not answered as a path with no route.
    const empty = await cli(['submit', '', 'count', '[1]'], env);
    expect(empty.code).toBe(2);
    expect(empty.stderr).toContain('queue must not be empty');
    expect((await cli(['worker', 'once', '--code', 'sideways'], env)).code).toBe(2);
    // A wait that is no number is the command line's mistake, not a wait forever.
    const forever = await cli(['result', 'no-such-id', '--timeout', 'abc'], env);
    expect([forever.code, forever.stderr]).toEqual([2, 'lakeshore: --timeout takes a number of seconds (0: no limit), got "abc"\n']);
    expect((await cli(['tail', 'no-such-id', '--since', '1.5'], env)).code).toBe(2);
    expect((await cli(['stats', '--watch', '--interval', 'abc'], env)).code).toBe(2); // it redrew as fast as the plane answered
    const py = await cli(['worker', 'once', '--runtime', 'python', '--queue', 'jobs', '--concurrency', 'abc'], env);
    expect([py.code, py.stderr]).toEqual([
      2,
      expect.stringContaining("argument --concurrency: takes a whole number of at least 1, got 'abc'"),
    ]);
    const noModule = await cli(['worker', 'once', '--queue', 'jobs', '--module', './no-such-handlers.mjs'], env);
    expect(noModule.code).toBe(2);
    expect(noModule.stderr).toMatch(/^lakeshore: --module \.\/no-such-handlers\.mjs: no such file \(\/.*no-such-handlers\.mjs\)$/m);
    // A module that does not load says which and where; one that exports no function is a usage error.
    const mods = tempDir('lakeshore-mods-');
    writeFileSync(join(mods, 'broken.mjs'), 'export function f( { return 1 }\n');
    writeFileSync(join(mods, 'empty.mjs'), 'const x = 1;\n');
    const broken = await cli(['worker', 'once', '--queue', 'jobs', '--module', join(mods, 'broken.mjs')], env);
    expect(broken.code).toBe(1);
    expect(broken.stderr).toContain(
      `lakeshore: --module ${join(mods, 'broken.mjs')} could not be loaded: SyntaxError: Unexpected number\n${join(mods, 'broken.mjs')}:1\n`,
    );
    // A job naming a module that does not compile, or is not there: it fails once, saying where, not retried.
    const q = `imports-${kind}`;
    const bad = (await cli(['submit', q, 'f', '[1]', '--module', './broken.mjs#f'], env)).stdout.trim();
    expect((await cli(['worker', 'once', '--queue', q, '--root', mods, '--allow-import', '--retries', '3'], env)).code).toBe(0);
    const gone = (await cli(['submit', q, 'f', '[1]', '--module', './gone.mjs#f'], env)).stdout.trim();
    expect((await cli(['worker', 'once', '--queue', q, '--root', mods, '--allow-import', '--retries', '3'], env)).code).toBe(0);
    const [badJob, goneJob] = [
      JSON.parse((await cli(['--json', 'get', bad], env)).stdout),
      JSON.parse((await cli(['--json', 'get', gone], env)).stdout),
    ];
    expect([badJob.state, badJob.attempt, badJob.error.type, goneJob.state, goneJob.attempt, goneJob.error.type]).toEqual([
      'failed',
      1,
      'ResolveError',
      'failed',
      1,
      'ResolveError',
    ]);
    const said = badJob.error.message.split('\n');
    expect(said.slice(0, 3)).toEqual([
      `could not import "./broken.mjs" under ${mods}: SyntaxError: Unexpected number`,
      `${join(mods, 'broken.mjs')}:1`,
      'export function f( { return 1 }',
    ]);
    expect(said[3]).toMatch(/^ +\^$/);
    expect(goneJob.error.message).toBe(
      `could not import "./gone.mjs" under ${mods}: Error: Cannot find module '${join(mods, 'gone.mjs')}'`,
    );
    const exportsNone = await cli(['worker', 'once', '--queue', 'jobs', '--module', join(mods, 'empty.mjs')], env);
    expect(exportsNone.code).toBe(2);
    expect(exportsNone.stderr).toContain('exports no function: export each handler');
    // A --root that is no directory, for either runtime: said at once, before any claim.
    for (const runtime of ['node', 'python']) {
      const noRoot = await cli(['worker', 'once', '--runtime', runtime, '--queue', 'jobs', '--root', './no-such-root'], env);
      expect(noRoot.code, runtime).toBe(2);
      expect(noRoot.stderr).toMatch(/^lakeshore: --root \.\/no-such-root: no such directory \(\/.*no-such-root\)$/m);
    }
    // A URL with no scheme is said at once as the mistake it is, not retried for 15 s as an outage.
    const schemeless = await cli(['stats', 'jobs'], { ...env, LAKESHORE_URL: '127.0.0.1:8787', LAKESHORE_RETRY_FOR_MS: '60000' });
    expect(schemeless.code).toBe(2);
    expect(schemeless.stderr).toBe("lakeshore: the plane's URL must be http(s)://host[:port], not '127.0.0.1:8787'\n");
    const help = await cli(['worker', 'start', '--help'], env);
    expect(help.code).toBe(0);
    expect(help.stdout).toContain('--concurrency');
  });
});

describe('lakeshore token (edge plane)', () => {
  it('creates a scoped token that works, lists it, and revokes it (refused within the bound: about a second)', async () => {
    const env = planeEnv('edge');
    const made = await cli(['--json', 'token', 'create', '--role', 'producer', '--name', 'ci'], env);
    expect(made.code).toBe(0);
    const t = JSON.parse(made.stdout) as { token: string; id: string };
    const asProducer = { ...env, LAKESHORE_TOKEN: t.token };
    expect((await cli(['submit', 'jobs', 'add', '[1, 2]'], asProducer)).code).toBe(0);
    expect((await cli(['worker', 'once', '--queue', 'jobs', '--module', HANDLERS], asProducer)).code).toBe(6); // a producer may not claim
    const listed = await cli(['--json', 'token', 'list'], env);
    expect(JSON.parse(listed.stdout.trim().split('\n')[0]!)).toMatchObject({ id: t.id, role: 'producer', name: 'ci' });
    expect((await cli(['token', 'revoke', t.id], env)).code).toBe(0);
    // Refused within the revocation's bound (docs/contract.md, "Tokens"): the plane's isolate had it cached.
    await until(async () => (await cli(['stats', 'jobs'], asProducer)).code === 6, 'the revoked token refused', 10_000, 200);
    expect((await cli(['token', 'list'], { ...env, LAKESHORE_URL: '' })).code).toBe(2);
    // With no token at all, the CLI says where one goes; a token the plane refuses gets no such hint.
    const none = await cli(['stats'], { ...env, LAKESHORE_TOKEN: '' });
    expect(none.code).toBe(6);
    expect(none.stderr).toContain('no token was sent: set LAKESHORE_TOKEN, or pass a token');
    expect((await cli(['stats'], asProducer)).stderr).not.toContain('no token was sent');
  });
});

describe('lakeshore stats (edge plane)', () => {
  it('shows every state from one overview: a count past 10,000 finished jobs as at least that many', async () => {
    const env = planeEnv('edge');
    const d = new HttpDispatch(env.LAKESHORE_URL!, { token: env.LAKESHORE_TOKEN!, namespace: env.LAKESHORE_NAMESPACE! });
    const envelope = new TextEncoder().encode('{}');
    for (let i = 0; i < 10_002; i += 1000)
      await d.submitMany(
        'big',
        Array.from({ length: Math.min(1000, 10_002 - i) }, (_, k) => ({ envelope, opts: { id: `b${i + k}` } })),
      );
    for (let done = 0; done < 10_001; ) {
      const got = await d.claimMany('big', 'w', Math.min(1000, 10_001 - done));
      await Promise.all(got.map((g) => d.ack(g.id, 'w')));
      done += got.length;
    }
    // delayed, queued and running exact, succeeded capped ("+"), as the dashboard shows them.
    expect((await cli(['stats', 'big'], env)).stdout).toMatch(/^big\s+0\s+1\s+0\s+10000\+\s+0\s+0$/m);
    const row = JSON.parse((await cli(['--json', 'stats', 'big'], env)).stdout.trim().split('\n')[0]!);
    expect(row).toMatchObject({ queue: 'big', queued: 1, succeeded: 10_000, capped: ['succeeded'] });
  }, 120_000);

  it('--watch waits ten times what a redraw took before the next, however short its interval (client/pace.ts)', async () => {
    const r = start(['--json', 'stats', '--watch', '--interval', '0.001'], planeEnv('edge'));
    const redraws = () => r.stdout().split('\n').filter(Boolean);
    try {
      await until(() => redraws().length >= 4, 'four redraws', 30_000, 20);
    } finally {
      await stop(r);
    }
    const drawn = redraws().map((l) => JSON.parse(l) as { at: number; took_ms: number });
    // Each redraw reads the plane over HTTP (the overview's pages and the storage): it takes time.
    for (const d of drawn) expect(d.took_ms).toBeGreaterThan(0);
    for (let i = 1; i < drawn.length; i++)
      expect(drawn[i]!.at - drawn[i - 1]!.at, `redraw ${i} after one that took ${drawn[i - 1]!.took_ms} ms`).toBeGreaterThanOrEqual(
        10 * drawn[i - 1]!.took_ms,
      );
  });
});

describe('an unreachable plane', () => {
  it('is said at once, while the CLI retries; then it fails with a hint and exit code 8', async () => {
    const env = {
      ...process.env,
      LAKESHORE_URL: `http://127.0.0.1:${await freePort()}`,
      LAKESHORE_TOKEN: 'x',
      LAKESHORE_RETRY_FOR_MS: '3000',
    };
    const r = start(['stats', 'demo'], env);
    await until(() => r.stderr().includes('cannot reach the plane at'), 'the first word of it', 10_000);
    expect(r.child.exitCode).toBeNull(); // still retrying: it did not wait until the end to say so
    expect(await r.exited).toBe(8);
    expect(r.stderr()).toMatch(/ECONNREFUSED.*retrying for up to 3 s/);
    expect(r.stderr()).toContain('is the plane running (npm start)?');
  });
});

describe('a worker whose parent is killed outright', () => {
  /** Starts the CLI as bin/lakeshore.mjs does on an older Node (itself on Node 22, LAKESHORE_LAUNCHED=1), under a stand-in launcher. */
  function launched(args: string[]) {
    const main = resolve(import.meta.dirname, '..', '..', 'bin', 'lakeshore.mjs');
    const launcher = spawn(
      process.execPath,
      [
        '-e',
        `const c = require('node:child_process').spawn(process.execPath, ['--disable-warning=ExperimentalWarning', ${JSON.stringify(main)}, ...${JSON.stringify(args)}], { stdio: 'inherit' }); console.log(c.pid); setInterval(() => {}, 1e9);`,
      ],
      { env: { ...planeEnv('local'), LAKESHORE_LAUNCHED: '1' }, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let out = '';
    let err = '';
    launcher.stdout!.on('data', (d) => (out += d));
    launcher.stderr!.on('data', (d) => (err += d));
    return { launcher, cli: () => Number(out.trim().split('\n')[0]), err: () => err };
  }

  it('a Node worker stops once the launcher that started it is killed (it passes no signal on)', async () => {
    const w = launched(['worker', 'start', '--queue', 'jobs', '--module', HANDLERS]);
    try {
      await until(() => w.err().includes('serving jobs'), 'the worker to serve', 30_000);
      w.launcher.kill('SIGKILL');
      await until(() => allExited([w.cli()]), 'the worker to stop after its launcher died', 15_000, 50);
      expect(w.err()).toContain('SIGTERM: draining');
    } finally {
      w.launcher.kill('SIGKILL');
      if (w.cli() && alive(w.cli())) process.kill(w.cli(), 'SIGKILL');
    }
  });

  it('a Python worker stops once the `lakeshore worker start` supervising it is killed', async () => {
    const w = launched(['worker', 'start', '--runtime', 'python', '--queue', 'pyjobs', '--root', tempDir('lakeshore-py-')]);
    let daemons: number[] = [];
    try {
      await until(() => w.err().includes('serving pyjobs'), 'the Python worker to serve', 30_000);
      daemons = descendants(w.cli()).map((p) => p.pid);
      expect(daemons.length, 'the supervisor started its daemon').toBeGreaterThanOrEqual(1);
      process.kill(w.cli(), 'SIGKILL'); // the supervisor itself, outright: it passes no SIGTERM on
      await until(() => allExited(daemons), 'the daemon to stop after its supervisor died', 15_000, 50);
      expect(w.err()).toContain('the process that started it is gone');
    } finally {
      w.launcher.kill('SIGKILL');
      for (const p of daemons) if (alive(p)) process.kill(p, 'SIGKILL');
    }
  });
});
