/**
 * Python and Node on one SQLite file: the Python local plane (client/python/lakeshore/local.py)
 * runs the core's SQL from sql.json, so a Python producer's job runs on a Node worker and the other
 * way round, blocking calls wake across the two, and claimers in both languages racing for the same
 * jobs never get the same one. Real processes: python3, and the lakeshore CLI or a Node script.
 */
import { spawn, spawnSync } from 'node:child_process';
import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { Dispatch, encodeEnvelope } from '../../client/local/index.ts';
import { cli, HANDLERS, start, stop } from './setup/cli.ts';
import { freshNs } from './setup/client.ts';
import { tempDir } from '../support/tmp.ts';
import { until } from '../support/wait.ts';
import { followLives } from '../support/feed-lives.ts';
import { PYTHON } from '../support/python.ts';

const ROOT = resolve(import.meta.dirname, '..', '..');
const PYTHONPATH = join(ROOT, 'client', 'python');
const PEER = join(ROOT, 'test', 'fixtures', 'local-peer.mjs');

/** Runs Python code with the checkout's package; its stdout, after it exits 0. */
function python(code: string, args: string[] = []): Promise<string> {
  return new Promise((ok, fail) => {
    const p = spawn(PYTHON, ['-c', code, ...args], { env: { ...process.env, PYTHONPATH }, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    p.stdout.on('data', (d) => (out += d));
    p.stderr.on('data', (d) => (err += d));
    p.on('exit', (c) => (c === 0 ? ok(out) : fail(new Error(`python exited ${c}: ${err}`))));
  });
}

const homeEnv = (home: string, ns: string) => ({
  ...process.env,
  LAKESHORE_URL: '',
  LAKESHORE_TOKEN: '',
  LAKESHORE_HOME: home,
  LAKESHORE_NAMESPACE: ns,
});

/** A fresh $LAKESHORE_HOME and namespace: its shared file, and the environment the CLI runs with. */
function sharedFile() {
  const home = tempDir('lakeshore-pyfile-');
  const ns = freshNs();
  return { home, ns, file: join(home, 'dispatch.sqlite'), env: homeEnv(home, ns) };
}

describe('Python and Node on one file', () => {
  it("the SQL the Python plane runs is the core's (sql.json is current)", () => {
    const r = spawnSync(
      process.execPath,
      ['--experimental-strip-types', '--no-warnings', join(ROOT, 'scripts', 'python-sql.ts'), '--check'],
      { encoding: 'utf8' },
    );
    expect(r.status, r.stderr).toBe(0);
  });

  it("a Python producer's job runs on a Node worker, its result waited for in Python", async () => {
    const { ns, file, env } = sharedFile();
    // Python submits and waits for the result (polling the file); the Node worker starts after.
    const waiting = python(
      `
import sys, lakeshore as ls
d = ls.Dispatch(sys.argv[1], ns=sys.argv[2])
d.submit("jobs", ls.encode_envelope("add", [2, 3]), id="from-python")
print(d.result("from-python", timeout=60).decode())
`,
      [file, ns],
    );
    const r = await cli(['worker', 'once', '--queue', 'jobs', '--module', HANDLERS], env);
    expect(r.code, r.stderr).toBe(0);
    expect((await waiting).trim()).toBe('5');
    const d = new Dispatch(file, { namespace: ns });
    expect(await d.get('from-python')).toMatchObject({ state: 'succeeded', attempt: 1 });
    await d.close();
  }, 60_000);

  it('the feed crosses processes and languages: a Node reader sees a Python process’s transitions, and a Python reader a Node one’s', async () => {
    const { ns, file } = sharedFile();
    const d = new Dispatch(file, { namespace: ns });
    const ac = new AbortController();
    const seen: string[] = [];
    const reading = (async () => {
      for await (const r of d.events('xl', { signal: ac.signal }))
        if (r.kind === 'job') seen.push(`${r.id}:${r.status}:${r.worker_id ?? ''}`);
    })();
    // The reader is in place once a record of its own process reaches it.
    let probes = 0;
    await until(async () => {
      await d.submit('xl', new TextEncoder().encode('p'), { id: `probe-${probes++}` });
      return seen.some((s) => s.startsWith('probe-'));
    }, 'the Node reader in place');
    // The Python process reads its own feed while it submits, claims and acks; it prints what it saw of Node's job.
    const py = python(
      `
import sys, threading, lakeshore as ls
d = ls.Dispatch(sys.argv[1], ns=sys.argv[2])
stop, got = threading.Event(), []
feed = d.events("xl", stop=stop)  # its place is taken here, before anything below
def read():
    for r in feed:
        if r["kind"] == "job" and r["id"] == "from-node":
            got.append(r["status"])
            if r["status"] == "succeeded":
                stop.set()
t = threading.Thread(target=read, daemon=True)
t.start()
d.submit("xl", b"x", id="from-python")
d.claim("xl", "py-worker", kind="filo")  # the newest: not a probe
d.ack("from-python", "py-worker", result=b"1")
print("ready", flush=True)
t.join(30)
print(",".join(got))
`,
      [file, ns],
    );
    await until(() => seen.includes('from-python:succeeded:py-worker'), 'the Python process’s records in the Node reader');
    expect(seen.filter((s) => s.startsWith('from-python:'))).toEqual([
      'from-python:queued:',
      'from-python:running:py-worker',
      'from-python:succeeded:py-worker',
    ]);
    await d.submit('xl', new TextEncoder().encode('y'), { id: 'from-node' });
    await d.claim('xl', 'node-worker', { kind: 'filo' });
    await d.ack('from-node', 'node-worker');
    expect((await py).trim().split('\n').pop()).toBe('queued,running,succeeded');
    ac.abort();
    await reading;
    await d.close();
  }, 60_000);

  it('tells a Python process’s submits before the Node processes’ claims of them, which come the moment each commits', async () => {
    const { ns, file } = sharedFile();
    const d = new Dispatch(file, { namespace: ns });
    const feed = await followLives(d);
    const n = 600;
    const workers = ['w1', 'w2'].map((w) =>
      spawn(process.execPath, ['--disable-warning=ExperimentalWarning', PEER, 'work', file, ns, 'order', w, String(n)], {
        stdio: 'ignore',
      }),
    );
    await python(
      `
import sys, threading, lakeshore as ls
d = ls.Dispatch(sys.argv[1], ns=sys.argv[2])
n = int(sys.argv[3])
def submit(k):  # eight threads: one may run between another's commit and its record
    for i in range(k, n, 8):
        d.submit("order", b"x", id="s%d" % i)
threads = [threading.Thread(target=submit, args=(k,)) for k in range(8)]
for t in threads:
    t.start()
for t in threads:
    t.join()
`,
      [file, ns, String(n)],
    );
    await Promise.all(workers.map((w) => new Promise((r) => (w.exitCode !== null ? r(null) : w.on('exit', r)))));
    await feed.expectInOrder('order', n);
    await feed.stop();
    await d.close();
  }, 60_000);

  it('a schedule the Node CLI set fires in a Python process that works the queue, and the other way round', async () => {
    const { ns, file, env } = sharedFile();
    // The CLI sets a schedule and exits: no Node process has the plane open when its ticks come due.
    const set = await cli(['schedule', 'set', 'cron-py', 'each-second', '--cron', '* * * * * *', '--fn', 'add', '--args', '[1, 2]'], env);
    expect(set.code, set.stderr).toBe(0);
    const out = await python(
      `
import sys, lakeshore as ls
d = ls.Dispatch(sys.argv[1], ns=sys.argv[2])
job = d.claim("cron-py", "w", wait=10)
print(job.id)
d.set_schedule("cron-node", "each-second", cron="* * * * * *", envelope=ls.encode_envelope("add", [2, 3]))
`,
      [file, ns],
    );
    expect(out.trim()).toMatch(/^schedule:cron-py:each-second:\d+000$/);
    // And a schedule Python set (its process gone) fires for a Node worker.
    const r = await cli(['worker', 'once', '--queue', 'cron-node', '--module', HANDLERS], env);
    expect(r.code, r.stderr).toBe(0);
    const d = new Dispatch(file, { namespace: ns });
    expect(await d.count('cron-node', 'succeeded')).toBe(1);
    await d.close();
  }, 60_000);

  it("a Node producer's job runs on a Python worker; a Node worker waiting on a claim wakes for a Python submit", async () => {
    const { ns, file, env } = sharedFile();
    const id = (await cli(['submit', 'gen', 'count', '[3]'], env)).stdout.trim();
    await python(
      `
import sys, lakeshore as ls
d = ls.Dispatch(sys.argv[1], ns=sys.argv[2])
def count(n, delay_ms=0):
    for i in range(n):
        yield i
    return n
assert ls.run_worker(ls.SyncQueue("gen", dispatch=d), registry={"count": count}, once=True) == 1
`,
      [file, ns],
    );
    const res = await cli(['--json', 'result', id], env);
    expect(JSON.parse(res.stdout)).toMatchObject({ state: 'succeeded', result: 3 });
    const tail = await cli(['--json', 'tail', id], env);
    expect(
      tail.stdout
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l).kind),
    ).toEqual(['BEGIN', 'VALUE', 'VALUE', 'VALUE', 'END']);
    // A Node worker already waiting: a Python submit wakes it.
    const worker = start(['worker', 'start', '--queue', 'jobs', '--module', HANDLERS], env);
    try {
      const out = await python(
        `
import sys, lakeshore as ls
d = ls.Dispatch(sys.argv[1], ns=sys.argv[2])
h = ls.SyncQueue("jobs", dispatch=d).submit("add", 20, 22)
print(h.result(timeout=60))
`,
        [file, ns],
      );
      expect(out.trim()).toBe('42');
    } finally {
      await stop(worker, 'SIGTERM');
    }
  }, 60_000);

  it('claimers in Python and Node racing on one file never get the same job', async () => {
    const { ns, file } = sharedFile();
    const d = new Dispatch(file, { namespace: ns });
    const N = 2000;
    for (let i = 0; i < N; i += 500)
      await d.submitMany(
        'race',
        Array.from({ length: 500 }, (_, k) => ({ envelope: encodeEnvelope({ fn: 'f' }), opts: { id: `r${i + k}` } })),
      );
    const py = python(
      `
import sys, json, lakeshore as ls
d = ls.Dispatch(sys.argv[1], ns=sys.argv[2])
got = []
while True:
    c = d.claim("race", "py")
    if c is None:
        break
    got.append([c.id, c.attempt])
print(json.dumps(got))
`,
      [file, ns],
    );
    const node: [string, number][] = [];
    // Node joins once Python is claiming: then both take from what is left.
    await until(async () => (await d.count('race', 'running')) > 0, 'the Python claimer to start');
    for (;;) {
      const c = await d.claim('race', 'node');
      if (!c) break;
      node.push([c.id, c.attempt]);
    }
    const pyGot = JSON.parse(await py) as [string, number][];
    const all = [...pyGot, ...node];
    console.log(`racing claimers: python took ${pyGot.length}, node ${node.length} of ${N}`);
    expect(all.length).toBe(N);
    expect(new Set(all.map(([id]) => id)).size).toBe(N);
    expect(all.every(([, attempt]) => attempt === 1)).toBe(true);
    // Both took part (the race was a race).
    expect(pyGot.length).toBeGreaterThan(0);
    expect(node.length).toBeGreaterThan(0);
    expect(await d.count('race', 'running')).toBe(N);
    await d.close();
  }, 60_000);
});
