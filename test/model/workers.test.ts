/**
 * A job's worker is stored as a number, its name once a namespace (src/core/sql/workers.ts,
 * migration 0018): reads still name the worker, the fencing guard still tells workers apart, a
 * claim that never looked (it parked first) still registers its worker, and the jobs claimed
 * before the migration keep their names and their holders.
 */
import { copyFileSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { afterEach, describe, expect, it } from 'vitest';
import { migrate, MIGRATIONS_DIR } from '../../client/local/migrate.ts';
import { SqlitePort } from '../../client/local/sqlite-port.ts';
import { Engine } from '../../src/core/engine.ts';
import { until } from '../support/wait.ts';

const bytes = (s: string) => new TextEncoder().encode(s);
const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function plane(opts: { singleWriter?: boolean } = {}) {
  const db = new DatabaseSync(':memory:');
  migrate(db);
  return { db, engine: new Engine(new SqlitePort(db), opts) };
}

describe('workers by number', () => {
  it('reads name the worker; the row holds a number, each name numbered once a namespace', async () => {
    const { db, engine } = plane();
    const long = 'ip-10-0-12-34.eu-west-1.compute.internal:48213';
    for (const ns of ['a', 'b']) {
      await engine.submitMany(
        ns,
        'q',
        [1, 2, 3].map((i) => ({ id: `j${i}`, envelope: bytes('{}') })),
      );
      for (const w of [long, 'w2', long]) {
        const [c] = await engine.work.claimMany(ns, 'q', { workerId: w, max: 1 });
        await engine.work.ack(ns, c!.id, { workerId: w, attempt: c!.attempt, result: bytes('1') });
      }
    }
    for (const ns of ['a', 'b']) {
      expect((await engine.get(ns, 'j1'))!.workerId).toBe(long);
      expect((await engine.get(ns, 'j2'))!.workerId).toBe('w2');
      expect((await engine.list(ns, 'q', 'succeeded')).items.map((i) => i.workerId).sort()).toEqual([long, long, 'w2'].sort());
    }
    expect(
      db
        .prepare('SELECT ns, n, name FROM workers ORDER BY ns, n')
        .all()
        .map((r) => ({ ...r })),
    ).toEqual([
      { ns: 'a', n: 1, name: long },
      { ns: 'a', n: 2, name: 'w2' },
      { ns: 'b', n: 1, name: long },
      { ns: 'b', n: 2, name: 'w2' },
    ]);
    expect(
      db
        .prepare(`SELECT DISTINCT typeof(worker) AS t FROM invocations`)
        .all()
        .map((r) => r.t),
    ).toEqual(['integer']);
  });

  it("refuses another worker's ack, named or never registered, and changes nothing", async () => {
    const { engine } = plane();
    await engine.submit('a', 'q', { id: 'j', envelope: bytes('{}') });
    await engine.submit('a', 'q', { id: 'k', envelope: bytes('{}') });
    const [c] = await engine.work.claimMany('a', 'q', { workerId: 'w1', max: 1 });
    await engine.work.claimMany('a', 'q', { workerId: 'w2', max: 1 }); // w2 is registered, and holds k
    for (const w of ['w2', 'never-claimed'])
      await expect(engine.work.ack('a', c!.id, { workerId: w, attempt: c!.attempt, result: null })).rejects.toMatchObject({ status: 409 });
    expect((await engine.get('a', c!.id))!.state).toBe('running');
    await engine.work.ack('a', c!.id, { workerId: 'w1', attempt: c!.attempt, result: null });
    expect((await engine.get('a', c!.id))!.state).toBe('succeeded');
  });

  it.each(['fifo', 'boltzmann'] as const)(
    "a set's guard compares the numbers %s claims told the engine: another worker's set is refused, the holder's taken",
    async (kind) => {
      const { db, engine } = plane();
      await engine.submitMany(
        'a',
        'q',
        ['j1', 'j2', 'k1', 'k2'].map((id) => ({ id, envelope: bytes('{}') })),
      );
      const mine = await engine.work.claimMany('a', 'q', { workerId: 'w1', max: 2, kind });
      const theirs = await engine.work.claimMany('a', 'q', { workerId: 'w2', max: 2, kind });
      expect([mine, theirs].map((c) => c.map((x) => x.id).sort())).toEqual([
        ['j1', 'j2'],
        ['k1', 'k2'],
      ]);
      // w2 knows w1's jobs' ids and attempts, and acks them as a set under its own name.
      const as = (w: string, cs: typeof mine) => cs.map((c) => ({ id: c.id, queue: 'q', workerId: w, attempt: c.attempt, result: null }));
      const refused = await engine.work.ackMany('a', as('w2', mine));
      expect(refused.map((r) => (r.ok ? 'ok' : r.error.code))).toEqual(['conflict', 'conflict']);
      expect(db.prepare(`SELECT count(*) AS n FROM invocations WHERE state = 'running'`).get()).toMatchObject({ n: 4 });
      const taken = await engine.work.ackMany('a', [...as('w1', mine), ...as('w2', theirs)]);
      expect(taken.map((r) => r.ok)).toEqual([true, true, true, true]);
      expect(db.prepare(`SELECT count(*) AS n FROM invocations WHERE state = 'succeeded'`).get()).toMatchObject({ n: 4 });
    },
  );

  it('registers the worker of a claim that parked before it ever looked, when a submit hands it a job', async () => {
    // A single writer's claim on a queue that rests (a claim came back short since) parks first
    // and is handed rows by the next submit's batch (core/work.ts `resting`, core/handoff.ts).
    const { engine } = plane({ singleWriter: true });
    await engine.submit('a', 'q', { id: 'first', envelope: bytes('{}') });
    const [f] = await engine.work.claimMany('a', 'q', { workerId: 'w1', max: 10, waitMs: 0 });
    await engine.work.ack('a', f!.id, { workerId: 'w1', attempt: f!.attempt, result: null });
    let parked = false;
    const waiting = engine.work.claimMany('a', 'q', { workerId: 'newcomer', max: 10, waitMs: 5_000, onPark: () => (parked = true) });
    await until(() => parked, "the newcomer's claim parked");
    await engine.submit('a', 'q', { id: 'second', envelope: bytes('{}') });
    const [c] = await waiting;
    expect(c!.id).toBe('second');
    expect((await engine.get('a', 'second'))!.workerId).toBe('newcomer');
    await engine.work.ack('a', 'second', { workerId: 'newcomer', attempt: c!.attempt, result: null });
    expect((await engine.get('a', 'second'))!.state).toBe('succeeded');
  });

  it('migration 0018 rewrites no row: a job claimed before it keeps its name, and its holder can still ack it', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'lakeshore-workers-'));
    dirs.push(dir);
    const before = readdirSync(MIGRATIONS_DIR).filter((f) => f.endsWith('.sql') && f < '0018');
    for (const f of before) copyFileSync(join(MIGRATIONS_DIR, f), join(dir, f));
    const db = new DatabaseSync(':memory:');
    migrate(db, dir);
    const lease = Date.now() + 60_000;
    const row = db.prepare(
      `INSERT INTO invocations (ns, queue, id, envelope, state, attempt, worker_id, lease_until, created_at, updated_at, finished_at, result)
       VALUES (?, 'q', ?, x'7b7d', ?, ?, ?, ?, 1, 1, ?, ?)`,
    );
    row.run('a', 'j1', 'succeeded', 1, 'gpu-2:77', null, 1, bytes('1'));
    row.run('a', 'j2', 'running', 1, 'gpu-1:12', lease, null, null);
    row.run('a', 'j3', 'running', 1, 'gpu-1:12', lease, null, null);
    row.run('a', 'j4', 'queued', 0, null, null, null, null);
    migrate(db); // the rest: 0018 on
    const engine = new Engine(new SqlitePort(db), {});
    const names = async (ids: string[]) => Promise.all(ids.map(async (id) => (await engine.get('a', id))!.workerId));
    expect(await names(['j1', 'j2', 'j3', 'j4'])).toEqual(['gpu-2:77', 'gpu-1:12', 'gpu-1:12', null]);
    expect((await engine.list('a', 'q', 'running')).items.map((i) => i.workerId)).toEqual(['gpu-1:12', 'gpu-1:12']);
    // The holders of the running jobs ack them, alone and as a set; no one else can.
    await expect(engine.work.ack('a', 'j2', { workerId: 'gpu-2:77', attempt: 1, result: null })).rejects.toMatchObject({ status: 409 });
    await engine.work.ack('a', 'j2', { workerId: 'gpu-1:12', attempt: 1, result: bytes('2') });
    const [c] = await engine.work.claimMany('a', 'q', { workerId: 'gpu-1:12', max: 1 }); // j4, by number now
    expect(c!.id).toBe('j4');
    const set = await engine.work.ackMany('a', [
      { id: 'j3', queue: 'q', workerId: 'gpu-1:12', attempt: 1, result: null },
      { id: 'j4', queue: 'q', workerId: 'gpu-1:12', attempt: c!.attempt, result: null },
    ]);
    expect(set.map((r) => r.ok)).toEqual([true, true]);
    expect(await names(['j2', 'j3', 'j4'])).toEqual(['gpu-1:12', 'gpu-1:12', 'gpu-1:12']);
    expect(
      db
        .prepare(`SELECT id, worker, worker_id FROM invocations ORDER BY rid`)
        .all()
        .map((r) => ({ ...r })),
    ).toEqual([
      { id: 'j1', worker: null, worker_id: 'gpu-2:77' },
      { id: 'j2', worker: null, worker_id: 'gpu-1:12' },
      { id: 'j3', worker: null, worker_id: 'gpu-1:12' },
      { id: 'j4', worker: 1, worker_id: null },
    ]);
  });
});
