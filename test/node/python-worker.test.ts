/**
 * `lakeshore worker start --queue gpu --root /data`, the reference's spelling: with no Node handlers
 * named, the CLI runs `python -m dreamlake.lakeshore.daemon` (real python3, real processes, the
 * edge plane of the test's wrangler dev) on every pool named, passes flags through, restarts it
 * when it is killed, and on SIGTERM lets the running job finish before it exits 0.
 */
import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { cli, planeEnv, start, stop, type Running } from './setup/cli.ts';
import { until } from '../support/wait.ts';
import { tempDir } from '../support/tmp.ts';

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};
const pids = (r: Running) => [...r.stderr().matchAll(/python worker started \(pid (\d+)\)/g)].map((m) => Number(m[1]));

describe('lakeshore worker with Python', () => {
  const running: Running[] = [];
  afterEach(async () => {
    for (const r of running.splice(0)) {
      for (const pid of pids(r)) if (alive(pid)) process.kill(pid, 'SIGKILL');
      await stop(r);
    }
  });

  it('runs Python functions imported under --root on two pools, restarts a killed daemon, and drains on SIGTERM', async () => {
    const env = planeEnv('edge');
    const root = tempDir('lakeshore-pyroot-');
    const mod = `pytasks_${process.pid}`;
    const mark = join(tempDir('lakeshore-mark-'), 'marks.log');
    writeFileSync(
      join(root, `${mod}.py`),
      [
        'import time',
        'def add(a, b):',
        '    return a + b',
        'def slow(ms, mark):',
        '    time.sleep(ms / 1000)',
        '    open(mark, "a").write("done\\n")',
        '    return "slow"',
        '',
      ].join('\n'),
    );
    // The reference's command, verbatim but for the second pool: no --runtime, no --module.
    const sup = start(['worker', 'start', '--queue', 'py', '--queue', 'py2', '--root', root], env);
    running.push(sup);
    const submit = async (fn: string, args: unknown[], pool = 'py') =>
      (await cli(['submit', pool, fn, JSON.stringify(args), '--module', `${mod}:${fn}`], env)).stdout.trim();
    const result = async (id: string) =>
      JSON.parse((await cli(['--json', 'result', id, '--timeout', '30'], env)).stdout) as { state: string; result: unknown };

    expect(await result(await submit('add', [2, 3]))).toMatchObject({ state: 'succeeded', result: 5 });
    expect(await result(await submit('add', [1, 1], 'py2'))).toMatchObject({ state: 'succeeded', result: 2 });
    expect(sup.stderr()).toContain(' -m dreamlake.lakeshore.daemon --queue py --queue py2 --root ');
    expect(sup.stderr()).toContain('lakeshore.daemon: serving py, py2 on');
    // Killed outright, the daemon is started again.
    await until(() => pids(sup).length === 1, 'the first daemon');
    const first = pids(sup)[0]!;
    process.kill(first, 'SIGKILL');
    await until(() => pids(sup).length === 2, 'the daemon started again', 20_000);
    expect(sup.stderr()).toContain('killed by SIGKILL; starting it again');
    expect(await result(await submit('add', [40, 2]))).toMatchObject({ state: 'succeeded', result: 42 });
    // SIGTERM while a job runs: the job finishes and is acked, then everything exits 0.
    const slow = await submit('slow', [1500, mark]);
    await until(async () => JSON.parse((await cli(['--json', 'get', slow], env)).stdout).state === 'running', 'the slow job to run');
    sup.child.kill('SIGTERM');
    expect(await sup.exited).toBe(0);
    expect(existsSync(mark) ? readFileSync(mark, 'utf8') : '').toBe('done\n');
    expect(await result(slow)).toMatchObject({ state: 'succeeded', result: 'slow' });
    expect(pids(sup).filter(alive)).toEqual([]);
  }, 90_000);

  it('`worker start --queue gpu --url URL --token "$TOK"` as the reference writes it: started in its code\'s directory, it imports from there and nothing else', async () => {
    const edge = planeEnv('edge');
    // Only the namespace comes from the environment: the plane and the token are the flags.
    const env = { ...edge, LAKESHORE_URL: '', LAKESHORE_TOKEN: '' };
    const dir = tempDir('lakeshore-pycwd-');
    const mod = `gputasks_${process.pid}`;
    writeFileSync(join(dir, `${mod}.py`), 'def square(x):\n    return x * x\n');
    const sup = start(['worker', 'start', '--queue', 'gpu', '--url', edge.LAKESHORE_URL!, '--token', edge.LAKESHORE_TOKEN!], env, dir);
    running.push(sup);
    // `lakeshore submit gpu pkg.mod:func ARGS`, as a user types it: no --module, the name is the import.
    const submit = async (fn: string, args: unknown[]) => (await cli(['submit', 'gpu', fn, JSON.stringify(args)], edge)).stdout.trim();
    const result = async (id: string) =>
      JSON.parse((await cli(['--json', 'result', id, '--timeout', '30'], edge)).stdout) as {
        state: string;
        result: unknown;
        error: { message: string } | null;
      };
    expect(await result(await submit(`${mod}:square`, [7]))).toMatchObject({ state: 'succeeded', result: 49 });
    // The standard library is not this directory's: refused at once, never imported.
    const bad = await result(await submit('os:getcwd', []));
    expect(bad.state).toBe('failed');
    expect(JSON.stringify(bad.error)).toContain("os is not a module of this worker's directory");
    sup.child.kill('SIGTERM');
    expect(await sup.exited).toBe(0);
  }, 60_000);

  it('`--concurrency` and `--lease-ms` reach the Python worker: jobs run side by side, on the lease asked for', async () => {
    const env = planeEnv('edge');
    const root = tempDir('lakeshore-pyconc-');
    const met = tempDir('lakeshore-met-');
    const release = join(tempDir('lakeshore-release-'), 'go');
    const mod = `pyconc_${process.pid}`;
    writeFileSync(
      join(root, `${mod}.py`),
      [
        'import os, threading, time',
        '# Each job marks that it started, then waits (at most 15 s) until n have: with fewer slots than n, it sees fewer.',
        'def meet(n, d):',
        '    open(os.path.join(d, str(threading.get_ident())), "w").close()',
        '    end = time.time() + 15',
        '    while len(os.listdir(d)) < n and time.time() < end:',
        '        time.sleep(0.02)',
        '    return len(os.listdir(d))',
        'def hold(path):',
        '    end = time.time() + 15',
        '    while not os.path.exists(path) and time.time() < end:',
        '        time.sleep(0.02)',
        '    return "held"',
        '',
      ].join('\n'),
    );
    const sup = start(['worker', 'start', '--queue', 'pyc', '--root', root, '--concurrency', '3', '--lease-ms', '4000'], env);
    running.push(sup);
    const submit = async (fn: string, args: unknown[]) =>
      (await cli(['submit', 'pyc', `${mod}:${fn}`, JSON.stringify(args)], env)).stdout.trim();
    const result = async (id: string) =>
      JSON.parse((await cli(['--json', 'result', id, '--timeout', '30'], env)).stdout) as { state: string; result: unknown };
    const ids = await Promise.all([0, 1, 2].map(() => submit('meet', [3, met])));
    for (const id of ids) expect(await result(id)).toMatchObject({ state: 'succeeded', result: 3 });
    expect(sup.stderr()).toContain(' --concurrency 3 --lease-ms 4000');
    // `--json` prints a line per worker.
    const workers = (await cli(['--json', 'workers'], env)).stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { queues: string[]; concurrency: number });
    expect(workers.find((w) => w.queues.includes('pyc'))?.concurrency).toBe(3);
    // A running job's lease is the 4 s asked for (heartbeats renew it), not the default 30 s.
    const held = await submit('hold', [release]);
    let lease = 0;
    await until(async () => {
      const g = JSON.parse((await cli(['--json', 'get', held], env)).stdout) as { state: string; lease_until: string | number };
      lease = new Date(g.lease_until).getTime() - Date.now();
      return g.state === 'running';
    }, 'the held job to run');
    expect(lease).toBeLessThanOrEqual(4_500);
    writeFileSync(release, '');
    expect(await result(held)).toMatchObject({ state: 'succeeded', result: 'held' });
  }, 90_000);

  it("a terminal's Ctrl-C lets the running job end; a second puts it back in its queue at once", async () => {
    const env = planeEnv('local');
    const root = tempDir('lakeshore-pyint-');
    const gate = join(tempDir('lakeshore-gate-'), 'go');
    const mod = `pyint_${process.pid}`;
    writeFileSync(
      join(root, `${mod}.py`),
      [
        'import os, time',
        'def hold(path):',
        '    end = time.time() + 60',
        '    while not os.path.exists(path) and time.time() < end:',
        '        time.sleep(0.02)',
        '    return "held"',
        '',
      ].join('\n'),
    );
    const get = async (id: string) =>
      JSON.parse((await cli(['--json', 'get', id], env)).stdout) as { state: string; attempt: number; error: { type: string } | null };
    // A terminal's Ctrl-C signals its foreground process group whole: the supervisor, and the
    // daemon unless it is in a group of its own (then it would hear two signals: stop now).
    const ctrlC = (r: Running) => process.kill(-r.child.pid!, 'SIGINT');
    const startHeld = async () => {
      const sup = start(['worker', 'start', '--queue', 'pyint', '--root', root], env, undefined, { group: true });
      running.push(sup);
      const id = (await cli(['submit', 'pyint', `${mod}:hold`, JSON.stringify([gate])], env)).stdout.trim();
      await until(async () => (await get(id)).state === 'running', 'the held job to run', 30_000);
      return { sup, id };
    };

    const first = await startHeld();
    ctrlC(first.sup);
    await until(() => first.sup.stderr().includes('no more claims; finishing the running job'), 'the daemon to hear the stop');
    expect((await get(first.id)).state).toBe('running');
    writeFileSync(gate, '');
    expect(await first.sup.exited).toBe(0);
    expect(await get(first.id)).toMatchObject({ state: 'succeeded', attempt: 1 });

    rmSync(gate);
    const second = await startHeld();
    ctrlC(second.sup);
    await until(() => second.sup.stderr().includes('no more claims; finishing the running job'), 'the daemon to hear the stop');
    ctrlC(second.sup);
    expect(await second.sup.exited).toBe(0);
    expect(second.sup.stderr()).toContain('again: stopped; 1 running job back in its queue');
    // Back now, not when its lease (30 s) runs out; the attempt it ran is charged.
    expect(await get(second.id)).toMatchObject({ state: 'queued', attempt: 1, error: { type: 'Interrupted' } });
    expect(pids(second.sup).filter(alive)).toEqual([]);
  }, 90_000);

  it('on the local plane (no URL) the Python daemon serves the same file the Node CLI submits to', async () => {
    const env = planeEnv('local');
    const root = tempDir('lakeshore-pyroot-');
    writeFileSync(join(root, 'local_tasks.py'), 'def shout(s):\n    return s.upper() + "!"\n');
    const id = (await cli(['submit', 'py', 'shout', '["hi"]', '--module', 'local_tasks:shout'], env)).stdout.trim();
    const r = await cli(['worker', 'once', '--queue', 'py', '--root', root], env);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toContain('on the local plane');
    expect(JSON.parse((await cli(['--json', 'result', id], env)).stdout)).toMatchObject({ state: 'succeeded', result: 'HI!' });
  }, 60_000);

  it("on the local plane the daemon serves the --home and --namespace given to the CLI, not the environment's", async () => {
    // The environment names another directory and namespace: the flags win, for the daemon as for the CLI.
    const env = { ...planeEnv('local'), LAKESHORE_HOME: tempDir('lakeshore-elsewhere-'), LAKESHORE_NAMESPACE: 'elsewhere' };
    const home = tempDir('lakeshore-flaghome-');
    const root = tempDir('lakeshore-pyroot-');
    writeFileSync(join(root, 'home_tasks.py'), 'def shout(s):\n    return s.upper() + "!"\n');
    const flags = ['--home', home, '--namespace', 'lab'];
    const id = (await cli([...flags, 'submit', 'py', 'home_tasks:shout', '["hi"]'], env)).stdout.trim();
    const r = await cli([...flags, 'worker', 'once', '--queue', 'py', '--root', root], env);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toContain('ran 1 job');
    expect(JSON.parse((await cli([...flags, '--json', 'result', id], env)).stdout)).toMatchObject({ state: 'succeeded', result: 'HI!' });
  }, 60_000);

  it('`worker once` naming no pool serves `default`, and on an empty one exits 0 after its short wait', async () => {
    const env = planeEnv('edge');
    const t0 = Date.now();
    const r = await cli(['worker', 'once'], env);
    expect(r.code, r.stderr).toBe(0);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(2_000);
    expect(r.stderr).toContain('lakeshore.daemon: serving default on');
    expect(r.stderr).toContain('ran 0 jobs');
  }, 60_000);
});
