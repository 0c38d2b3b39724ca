/**
 * A namespace's move in steps (src/durable/mover.ts, copy.ts): this suite's plane lets a step ask
 * 24 statements and calls (MOVE_STEP_SUBREQUESTS, vitest.edge.config.ts), so a few hundred jobs
 * take dozens of the mover's invocations. What the move under load does is test/node/move.test.ts.
 */
import { runInDurableObject } from 'cloudflare:test';
import { env } from 'cloudflare:workers';
import { expect, it } from 'vitest';
import { shardNamed } from '../../src/durable/directory.ts';
import { b64, call, plane, unb64, type Answer } from './setup/http.ts';
import { queueStub } from './setup/objects.ts';
import { until } from '../support/wait.ts';

const N = 400;
const STEP = 24;
/** The phases a move copies in while the namespace goes on working (mover.ts). */
const LIVE = new Set(['clear', 'track', 'reserve', 'jobs', 'frames', 'due', 'workers', 'check', 'live']);

const where = async (ns: string) =>
  (await env.DB.prepare(`SELECT shard FROM namespaces WHERE ns = ?1`).bind(ns).first<{ shard: string }>())!.shard;

/** What a move's noting of changes (move-track.ts) left on a shard: its triggers, and the ids it noted of the namespace. */
const noting = async (shard: string, ns: string) =>
  shardNamed(env, shard)
    .db.prepare(
      `SELECT (SELECT count(*) FROM sqlite_master WHERE type = 'trigger' AND name LIKE 'lakeshore_move_%') AS triggers,
              (SELECT count(*) FROM lakeshore_move_changes WHERE ns = ?1) AS notes`,
    )
    .bind(ns)
    .first();

/** The namespace's rows on a shard, table by table. */
const rowsOn = async (shard: string, ns: string) =>
  shardNamed(env, shard)
    .db.prepare(
      `SELECT (SELECT count(*) FROM invocations WHERE ns = ?1) AS jobs,
              (SELECT count(*) FROM frames WHERE inv IN (SELECT rid FROM invocations WHERE ns = ?1)) AS frames,
              (SELECT count(*) FROM journals_due WHERE ns = ?1) AS due, (SELECT count(*) FROM queues WHERE ns = ?1) AS queues`,
    )
    .bind(ns)
    .first();

/** The names of the namespace's workers on a shard, by number. */
const workersOn = async (shard: string, ns: string) =>
  (
    await shardNamed(env, shard).db.prepare(`SELECT name FROM workers WHERE ns = ?1 ORDER BY n`).bind(ns).all<{ name: string }>()
  ).results.map((r) => r.name);

/** A write as a client makes it: again while the namespace's writes are fenced (503), as the clients retry. */
async function written(send: () => Promise<Answer>): Promise<Answer> {
  let a: Answer | undefined;
  await until(async () => (a = await send()).status !== 503, 'a write past the fence', 30_000, 25);
  return a!;
}

it('moves a namespace in steps within their bound while it works, its writes fenced only to catch up, claim order and journals whole', async () => {
  const p = plane();
  const base = `/v1/ns/${p.ns}`;
  // Ids that sort against the order they were submitted in: the copy goes by id, claims by row number.
  const id = (i: number) => `j${String(N - i).padStart(4, '0')}`;
  const priority = (i: number) => (i % 3 === 0 ? 5 : 0);
  await p.configure('a', { journal_retention_ms: 86_400_000 });
  await p.configure('b', { lease_ms: 12_345 });
  for (let at = 0; at < N; at += 100) {
    const items = Array.from({ length: 100 }, (_, k) => ({ id: id(at + k), envelope: b64(`e${at + k}`), priority: priority(at + k) }));
    expect((await call('POST', `${base}/queues/a/invocations/batch`, { items })).status).toBe(200);
  }
  // The claim order: priority first, then the order of submission.
  const order = Array.from({ length: N }, (_, i) => i).sort((x, y) => priority(y) - priority(x) || x - y);
  // 30 run: one writes 150 frames (more than a page, and than a step), 20 write 3 and finish, 9 stay running.
  const claimed = (await p.claim('a', 'w', { max: 30 })).body.claimed.map((c: { id: string }) => c.id);
  expect(claimed).toEqual(order.slice(0, 30).map(id));
  for (let s = 0; s < 150; s++) expect((await p.append(claimed[0], 'w', { seq: s, body: b64(`f${s}`) })).status).toBe(200);
  for (const j of claimed.slice(1, 21)) {
    for (let s = 0; s < 3; s++) await p.append(j, 'w', { seq: s, body: b64(`${j}.${s}`) });
    expect((await p.ack(j, 'w', { result: b64(`r-${j}`) })).status).toBe(200);
  }
  const from = await where(p.ns);
  const to = from === 'DB_1' ? 'DB_2' : 'DB_1';
  expect(await rowsOn(from, p.ns)).toEqual({ jobs: N, frames: 210, due: 20, queues: 2 });

  const started = await call('POST', `${base}/move`, { to });
  expect(started.status, JSON.stringify(started.body)).toBe(202);
  expect(started.body).toMatchObject({ namespace: p.ns, from, to, state: 'moving' });

  // Meanwhile the namespace works: new jobs, frames of a running job, jobs finished and deleted.
  const fresh = (k: number) => `n${String(k).padStart(3, '0')}`;
  const actions: (() => Promise<Answer>)[] = [];
  for (let k = 0; k < 12; k++) {
    actions.push(() => p.submit('a', fresh(k), { priority: k % 2 ? 5 : 0 }));
    actions.push(() => p.append(claimed[0], 'w', { seq: 150 + k, body: b64(`f${150 + k}`) }));
  }
  for (const j of claimed.slice(21, 25)) {
    actions.push(() => p.append(j, 'w', { seq: 0, body: b64(`${j}.late`) }));
    actions.push(() => p.ack(j, 'w', { result: b64(`r-${j}`) }));
  }
  for (const j of claimed.slice(1, 4)) actions.push(() => call('DELETE', `${base}/invocations/${j}`));
  // Jobs claimed once the copy has passed them, and left running: the copy made of them waiting must not stand.
  const taken: string[] = [];
  const phase = async () => (await call('GET', `${base}/move`)).body.phase as string;
  let takenLive = 0;
  const claims = async () => {
    await until(async () => !['clear', 'track', 'reserve', 'jobs'].includes(await phase()), 'the copy past the jobs', 30_000, 5);
    for (let k = 0; k < 4; k++) {
      const before = await phase();
      const a = await written(() => p.claim('a', 'w3', { max: 2 }));
      taken.push(...a.body.claimed.map((c: { id: string }) => c.id));
      if (LIVE.has(before) && LIVE.has(await phase())) takenLive++;
    }
  };
  // And a worker runs jobs of another queue throughout: claims that wait, frames, acks.
  const worked: string[] = [];
  let working = true;
  const worker = (async () => {
    while (working) {
      const got = await written(() => p.claim('c', 'w4', { max: 2, wait_ms: 100 }));
      for (const c of got.body.claimed ?? []) {
        await written(() => p.append(c.id, 'w4', { seq: 0, body: b64('x') }));
        await written(() => p.ack(c.id, 'w4', { result: b64('ok') }));
        worked.push(c.id);
      }
    }
  })();
  for (let k = 0; k < 60; k += 10)
    await call('POST', `${base}/queues/c/invocations/batch`, {
      items: Array.from({ length: 10 }, (_, i) => ({ id: `c${k + i}`, envelope: b64('c') })),
    });
  // A worker that first claims once the workers were copied, while the namespace works: the fence
  // copies it. Those that claimed before were copied while it worked.
  let lateLive = false;
  let copiedLive: string[] = [];
  const lateWorker = (async () => {
    await until(async () => ['check', 'live'].includes(await phase()), 'the workers copied', 30_000, 2);
    copiedLive = await workersOn(to, p.ns);
    expect((await written(() => p.claim('d', 'w5'))).status).toBe(200);
    lateLive = ['check', 'live'].includes(await phase());
  })();
  let live = 0;
  let m = started.body;
  const claimed2 = claims();
  for (const act of actions) {
    const before = (await call('GET', `${base}/move`)).body.phase;
    const a = await written(act);
    expect(a.status, JSON.stringify(a.body)).toBeLessThan(300);
    if (LIVE.has(before) && LIVE.has((await call('GET', `${base}/move`)).body.phase)) live++;
  }
  for (let polls = 0; m.state === 'moving' && polls < 20; polls++) m = (await call('GET', `${base}/move?wait_ms=30000`)).body;
  await claimed2;
  await lateWorker;
  await until(() => worked.length === 60, 'the worker through its queue', 30_000);
  working = false;
  await worker;
  console.log(`[move] ${JSON.stringify(m)}; ${live} of ${actions.length} writes and ${takenLive} of 4 claims made while it copied`);
  expect(m).toMatchObject({ state: 'moved', phase: 'ended', error: null });
  expect(live, 'writes accepted while the move copied').toBeGreaterThan(0);
  expect(takenLive, 'claims made after the copy of their jobs, before the fence').toBeGreaterThan(0);
  // Writes waited for the catch-up only, and what changed while it copied was caught up while it
  // worked (some hundred jobs written meanwhile): the fence took what its last round left.
  expect(m.fenced_ms).toBeLessThan(m.ms);
  expect(m.caught_up, 'jobs caught up under the fence').toBeLessThan(50);
  // Many steps, none past its bound.
  expect(m.steps).toBeGreaterThan(20);
  expect(m.most_subrequests_a_step).toBeLessThanOrEqual(STEP);
  // Every page read along an index: what the move read (the copy, its comparison, the rounds of
  // catching up, a job a step at this bound, and the count, on both shards) stays within a few
  // dozen rows a row. With each page read by a sort of the namespace's jobs, about twice as many.
  const rows = N + 12 + 210 + 12 + 4 + 20 + 2 + 60 + 60;
  expect(m.rows_read, `rows read for about ${rows} rows`).toBeLessThan(40 * rows);
  expect(await where(p.ns)).toBe(to);
  const after = { jobs: N + 12 - 3 + 60, frames: 210 + 12 + 4 - 9 + worked.length, due: 20 + 4 - 3, queues: 2 };
  expect(await rowsOn(to, p.ns)).toEqual(after);
  expect(await noting(from, p.ns), 'the shard it left notes nothing more').toEqual({ triggers: 0, notes: 0 });
  // Every worker came along with its number: 'w' copied while it worked, 'w5' (first seen after that) under the fence.
  expect(copiedLive, 'workers on the new shard while the namespace worked').toContain('w');
  expect(lateLive, "w5's first claim made while the namespace worked").toBe(true);
  expect(await workersOn(to, p.ns)).toEqual(await workersOn(from, p.ns));
  expect(await workersOn(to, p.ns)).toContain('w5');

  // On the new shard: the rest claimed in the order they would have been, the journals whole.
  const rest: string[] = [];
  for (let got = 1; got; ) {
    const page = (await p.claim('a', 'w2', { max: 100 })).body.claimed.map((c: { id: string }) => c.id);
    rest.push(...page);
    got = page.length;
  }
  const waiting = order.slice(30).map(id);
  const news = (pr: number) =>
    Array.from({ length: 12 }, (_, k) => k)
      .filter((k) => (k % 2 ? 5 : 0) === pr)
      .map(fresh);
  const high = waiting.filter((j) => priority(N - Number(j.slice(1))) === 5);
  const expected = [...high, ...news(5), ...waiting.filter((j) => !high.includes(j)), ...news(0)];
  // Those taken while it moved were the first waiting then (the new ones came in at their priority's end).
  expect(taken).toHaveLength(8);
  expect([...taken, ...rest].sort()).toEqual([...expected].sort());
  expect(rest).toEqual(expected.filter((j) => !taken.includes(j)));
  for (const j of taken) expect((await p.get(j)).body).toMatchObject({ state: 'running', worker_id: 'w3' });
  const long = (await p.read(claimed[0])).body;
  expect(long.frames.map((f: { seq: number; body: string }) => `${f.seq}:${unb64(f.body)}`)).toEqual(
    Array.from({ length: 162 }, (_, s) => `${s}:f${s}`),
  );
  for (const j of claimed.slice(1, 4)) expect((await p.get(j)).status).toBe(404);
  for (const j of claimed.slice(4, 21)) {
    expect((await p.get(j)).body).toMatchObject({ state: 'succeeded', result: b64(`r-${j}`) });
    expect((await p.read(j)).body.frames.map((f: { body: string }) => unb64(f.body))).toEqual([0, 1, 2].map((s) => `${j}.${s}`));
  }
  for (const j of claimed.slice(21, 25)) {
    expect((await p.get(j)).body).toMatchObject({ state: 'succeeded', result: b64(`r-${j}`) });
    expect((await p.read(j)).body.frames.map((f: { body: string }) => unb64(f.body))).toEqual([`${j}.late`]);
  }
  // The running ones are still held by their worker, and finish.
  expect((await p.ack(claimed[29], 'w', { result: b64('late') })).status).toBe(200);
  expect((await call('GET', `${base}/queues/b`)).body.settings).toMatchObject({ lease_ms: 12_345 });
}, 120_000);

it('undoes a move that fails before its switch: the namespace stays where it was, whole, and works', async () => {
  const p = plane();
  const base = `/v1/ns/${p.ns}`;
  const items = Array.from({ length: 100 }, (_, i) => ({ id: `u${i}`, envelope: b64(`e${i}`) }));
  expect((await call('POST', `${base}/queues/a/invocations/batch`, { items })).status).toBe(200);
  await p.claim('a', 'w', { max: 10 });
  const from = await where(p.ns);
  const to = from === 'DB_1' ? 'DB_2' : 'DB_1';
  const before = await rowsOn(from, p.ns);
  expect((await call('POST', `${base}/move`, { to })).status).toBe(202);
  // Once its writes are fenced, the directory entry changes under it (as another writer of the
  // directory would): its switch finds another epoch, and the move must be undone.
  // (Its check under the fence waits SIMULATED_MOVE_PAUSE_MS first, vitest.edge.config.ts: the change lands before the switch.)
  const fenced = new Set(['mark', 'fence', 'changed', 'rest', 'verify']);
  await until(async () => fenced.has((await call('GET', `${base}/move`)).body.phase), 'the move fenced', 30_000, 2);
  await env.DB.prepare(`UPDATE namespaces SET epoch = epoch + 100 WHERE ns = ?1`).bind(p.ns).run();
  let m = (await call('GET', `${base}/move?wait_ms=30000`)).body;
  for (let polls = 0; m.state === 'moving' && polls < 5; polls++) m = (await call('GET', `${base}/move?wait_ms=30000`)).body;
  expect(m).toMatchObject({ state: 'undone', phase: 'ended', error: expect.stringMatching(/changed during the move/) });
  expect(await env.DB.prepare(`SELECT shard, state FROM namespaces WHERE ns = ?1`).bind(p.ns).first()).toEqual({
    shard: from,
    state: 'active',
  });
  expect(await rowsOn(from, p.ns)).toEqual(before);
  expect(await noting(from, p.ns), 'the undone move notes nothing more').toEqual({ triggers: 0, notes: 0 });
  expect(await rowsOn(to, p.ns)).toEqual({ jobs: 0, frames: 0, due: 0, queues: 0 });
  // Its objects were unfenced where it is: writes and claims go on there.
  expect((await written(() => p.submit('a', 'after'))).status).toBe(201);
  expect((await written(() => p.ack('u0', 'w'))).status).toBe(200);
  expect(await rowsOn(from, p.ns)).toMatchObject({ jobs: 101 });
  // And it can be moved again.
  expect((await call('POST', `${base}/move`, { to })).status).toBe(202);
  m = (await call('GET', `${base}/move?wait_ms=30000`)).body;
  for (let polls = 0; m.state === 'moving' && polls < 5; polls++) m = (await call('GET', `${base}/move?wait_ms=30000`)).body;
  expect(m).toMatchObject({ state: 'moved', jobs: 101 });
}, 60_000);

it('undoes a move whose copy differs from its source, checked while the namespace works', async () => {
  const p = plane();
  const base = `/v1/ns/${p.ns}`;
  for (let at = 0; at < 200; at += 100) {
    const items = Array.from({ length: 100 }, (_, i) => ({ id: `s${at + i}`, envelope: b64(`e${at + i}`) }));
    expect((await call('POST', `${base}/queues/a/invocations/batch`, { items })).status).toBe(200);
  }
  const from = await where(p.ns);
  const to = from === 'DB_1' ? 'DB_2' : 'DB_1';
  const before = await rowsOn(from, p.ns);
  expect((await call('POST', `${base}/move`, { to })).status).toBe(202);
  // Once the target is cleared, a job appears there that the source never had (as a copy gone
  // wrong would leave it). Nothing notes it: only the check of both shards can find it.
  const phase = async () => (await call('GET', `${base}/move`)).body.phase as string;
  await until(async () => (await phase()) !== 'clear', 'the target cleared', 30_000, 1);
  await shardNamed(env, to)
    .db.prepare(
      `INSERT INTO invocations (ns, queue, id, envelope, state, created_at, updated_at) VALUES (?1, 'a', 'stray', x'00', 'queued', 1, 1)`,
    )
    .bind(p.ns)
    .run();
  expect(['track', 'reserve', 'jobs', 'frames', 'due', 'workers'], 'the stray job came before the check').toContain(await phase());
  let m = (await call('GET', `${base}/move?wait_ms=30000`)).body;
  for (let polls = 0; m.state === 'moving' && polls < 5; polls++) m = (await call('GET', `${base}/move?wait_ms=30000`)).body;
  expect(m).toMatchObject({ state: 'undone', phase: 'ended', error: expect.stringMatching(/does not match its source/) });
  expect(await where(p.ns)).toBe(from);
  expect(await rowsOn(from, p.ns)).toEqual(before);
  expect(await rowsOn(to, p.ns)).toEqual({ jobs: 0, frames: 0, due: 0, queues: 0 });
  expect(await noting(from, p.ns)).toEqual({ triggers: 0, notes: 0 });
}, 60_000);

it('copies a job made while it copies that took the number of one deleted meanwhile (SQLite reuses the highest)', async () => {
  const p = plane();
  const base = `/v1/ns/${p.ns}`;
  const items = Array.from({ length: 300 }, (_, i) => ({
    id: `r${String(i).padStart(3, '0')}`,
    envelope: b64(`e${i}`),
    priority: i === 299 ? 9 : 0,
  }));
  for (let at = 0; at < 300; at += 100)
    expect((await call('POST', `${base}/queues/a/invocations/batch`, { items: items.slice(at, at + 100) })).status).toBe(200);
  // The last job made (the highest number) runs first and finishes, so it can be deleted.
  expect((await p.claim('a', 'w')).body.claimed[0].id).toBe('r299');
  expect((await p.ack('r299', 'w')).status).toBe(200);
  const from = await where(p.ns);
  const to = from === 'DB_1' ? 'DB_2' : 'DB_1';
  const src = shardNamed(env, from).db;
  const ridOf = async (id: string) =>
    (await src.prepare(`SELECT rid FROM invocations WHERE ns = ?1 AND id = ?2`).bind(p.ns, id).first<{ rid: number }>())?.rid;
  const top = await ridOf('r299');
  const highest = await src.prepare(`SELECT max(rid) AS m FROM invocations`).first<{ m: number }>();
  expect(highest!.m, 'r299 is the highest row of its shard').toBe(top);
  expect((await call('POST', `${base}/move`, { to })).status).toBe(202);
  // Once the copy has begun (its block reserved, r299 copied to its top), r299 is deleted and a new
  // job takes its number.
  await until(async () => ['jobs', 'frames', 'due'].includes((await call('GET', `${base}/move`)).body.phase), 'the copy begun', 30_000, 1);
  expect((await written(() => call('DELETE', `${base}/invocations/r299`))).status).toBe(200);
  expect((await written(() => p.submit('a', 'again'))).status).toBeLessThan(300);
  let m = (await call('GET', `${base}/move?wait_ms=30000`)).body;
  for (let polls = 0; m.state === 'moving' && polls < 5; polls++) m = (await call('GET', `${base}/move?wait_ms=30000`)).body;
  // The case itself: the new job took r299's number, before the copy's fence.
  const reused = (await ridOf('again')) === top;
  console.log(`[move] ${JSON.stringify(m)}; the new job took r299's number: ${reused}`);
  expect(reused).toBe(true);
  expect(m).toMatchObject({ state: 'moved', error: null });
  expect(await rowsOn(to, p.ns)).toMatchObject({ jobs: 300 });
  expect((await p.get('r299')).status).toBe(404);
  // Claimed in the order they were made: r000..r298, then the new one.
  const order: string[] = [];
  for (let got = 1; got; ) {
    const page = (await p.claim('a', 'w2', { max: 100 })).body.claimed.map((c: { id: string }) => c.id);
    order.push(...page);
    got = page.length;
  }
  expect(order).toEqual([...items.slice(0, 299).map((i) => i.id), 'again']);
}, 60_000);

it('undoes a move when the source gives a job made meanwhile a number below the block (every row above deleted)', async () => {
  const p = plane();
  const base = `/v1/ns/${p.ns}`;
  // `gap` is made first and deleted before the move: the namespace's first job is the one after
  // it, and the number it had is free below the block.
  expect((await p.submit('a', 'gap')).status).toBe(201);
  const items = Array.from({ length: 100 }, (_, i) => ({ id: `b${String(i).padStart(3, '0')}`, envelope: b64(`e${i}`) }));
  expect((await call('POST', `${base}/queues/a/invocations/batch`, { items })).status).toBe(200);
  expect((await p.claim('a', 'w')).body.claimed[0].id).toBe('gap');
  expect((await p.ack('gap', 'w')).status).toBe(200);
  expect((await call('DELETE', `${base}/invocations/gap`)).status).toBe(200);
  // Every job runs and succeeds: each claim acks the page before (one request a page).
  for (let acks: { id: string; attempt: number }[] = [], first = true; first || acks.length; first = false) {
    const a = await p.claim('a', 'w', { max: 100, ...(first ? {} : { acks }) });
    expect(a.status).toBe(200);
    acks = a.body.claimed.map((c: { id: string; attempt: number }) => ({ id: c.id, attempt: c.attempt }));
  }
  expect((await call('GET', `${base}/queues/a/count?state=succeeded`)).body).toMatchObject({ count: 100 });
  const from = await where(p.ns);
  const to = from === 'DB_1' ? 'DB_2' : 'DB_1';
  const src = shardNamed(env, from).db;
  const ridOf = async (id: string) =>
    (await src.prepare(`SELECT rid FROM invocations WHERE ns = ?1 AND id = ?2`).bind(p.ns, id).first<{ rid: number }>())?.rid;
  const first = (await ridOf('b000'))!;
  const highest = await src.prepare(`SELECT max(rid) AS m FROM invocations`).first<{ m: number }>();
  expect(highest!.m, "the namespace's jobs are the highest rows of its shard").toBe(await ridOf('b099'));
  expect((await call('POST', `${base}/move`, { to })).status).toBe(202);
  // Once the copy has begun (its block reserved from b000's number), every job is purged: no row
  // of the shard is left above the gap, and the next job made takes a number below the block.
  await until(async () => ['jobs', 'frames', 'due'].includes((await call('GET', `${base}/move`)).body.phase), 'the copy begun', 30_000, 1);
  const purged = await written(() => call('POST', `${base}/queues/a/purge`, { state: 'succeeded' }));
  expect(purged.body).toEqual({ purged: 100 });
  expect((await written(() => p.submit('a', 'below'))).status).toBe(201);
  expect(await ridOf('below'), 'the new job took a number below the block').toBeLessThan(first);
  let m = (await call('GET', `${base}/move?wait_ms=30000`)).body;
  for (let polls = 0; m.state === 'moving' && polls < 5; polls++) m = (await call('GET', `${base}/move?wait_ms=30000`)).body;
  // Its copy could not keep the claim order: the move is undone, saying why, and can be made again.
  expect(m).toMatchObject({ state: 'undone', phase: 'ended', error: expect.stringMatching(/outside its move's block.*move it again/) });
  expect(await where(p.ns)).toBe(from);
  expect(await rowsOn(from, p.ns)).toEqual({ jobs: 1, frames: 0, due: 0, queues: 0 });
  expect(await rowsOn(to, p.ns)).toEqual({ jobs: 0, frames: 0, due: 0, queues: 0 });
  expect(await noting(from, p.ns)).toEqual({ triggers: 0, notes: 0 });
  expect((await p.claim('a', 'w')).body.claimed.map((c: { id: string }) => c.id)).toEqual(['below']);
  expect((await call('POST', `${base}/move`, { to })).status).toBe(202);
  m = (await call('GET', `${base}/move?wait_ms=30000`)).body;
  for (let polls = 0; m.state === 'moving' && polls < 5; polls++) m = (await call('GET', `${base}/move?wait_ms=30000`)).body;
  expect(m).toMatchObject({ state: 'moved', jobs: 1 });
  expect((await p.get('below')).body).toMatchObject({ state: 'running', worker_id: 'w' });
}, 60_000);

/** A move's mark and fence of queue `a`, as the mover makes them, and then no unfence from it (as if its call were lost). */
async function fencedByLostMove(p: ReturnType<typeof plane>) {
  expect((await p.submit('a', 'before')).status).toBe(201);
  const marked = await env.DB.prepare(`UPDATE namespaces SET state = 'moving', epoch = epoch + 1 WHERE ns = ?1 RETURNING epoch, shard`)
    .bind(p.ns)
    .first<{ epoch: number; shard: string }>();
  await queueStub(p.ns, 'a').fence(marked!.epoch);
  return marked!;
}

/** Whether queue `a`'s object is fenced now (read inside it: no request of its own that would look). */
const fenced = (ns: string) => runInDurableObject(queueStub(ns, 'a'), (o) => (o as unknown as { place: { fenced: boolean } }).place.fenced);

/** The move ends (here: undone, the namespace where it was), and says so only in the directory. */
const endedInDirectoryOnly = (ns: string) =>
  env.DB.prepare(`UPDATE namespaces SET state = 'active', epoch = epoch + 1 WHERE ns = ?1`).bind(ns).run();

it('unfences a fenced queue object with timed work at its alarm when the mover does not (its look, then every MOVE_LOOK_MS)', async () => {
  const p = plane();
  // Timed work: a job due in 300 ms, for which the object's alarm is armed.
  expect((await p.submit('a', 'later', { delay_ms: 300 })).status).toBe(201);
  const marked = await fencedByLostMove(p);
  expect(await fenced(p.ns)).toBe(true);
  await endedInDirectoryOnly(p.ns);
  // No request reaches the object meanwhile: its alarm alone looks.
  await until(async () => !(await fenced(p.ns)), 'the object unfenced by its alarm', 10_000, 50);
  // Unfenced, it swept: the delayed job is due and waits with the other.
  await until(async () => (await p.get('later')).body.state === 'queued', 'the delayed job due', 10_000, 50);
  expect((await p.claim('a', 'w', { max: 2 })).body.claimed.map((c: { id: string }) => c.id).sort()).toEqual(['before', 'later']);
  expect(await rowsOn(marked.shard, p.ns)).toMatchObject({ jobs: 2 });
});

it('unfences a fenced queue object at a request that meets the fence once the directory says the move ended', async () => {
  const p = plane();
  const marked = await fencedByLostMove(p);
  // Its alarm will not look (deleted): only its requests may.
  await runInDurableObject(queueStub(p.ns, 'a'), (_o, state) => state.storage.deleteAlarm());
  const refused = await p.submit('a', 'fenced');
  expect([refused.status, refused.body.error.code]).toEqual([503, 'unavailable']);
  await endedInDirectoryOnly(p.ns);
  await until(async () => (await p.submit('a', 'after')).status === 201, 'a request to find the move ended', 10_000, 50);
  expect((await p.claim('a', 'w', { max: 2 })).body.claimed.map((c: { id: string }) => c.id)).toEqual(['before', 'after']);
  expect(await rowsOn(marked.shard, p.ns)).toMatchObject({ jobs: 2 });
});

it("unfences a fenced pushing queue object at its pusher's next claim, with no request and no alarm", async () => {
  const p = plane();
  await p.configure('a', { push: { url: 'service://PUSH_TEST_HOOKS/now' } });
  expect((await p.submit('a', 'pushed')).status).toBe(201);
  expect((await p.result('pushed', 10_000)).body.state).toBe('succeeded');
  // Fenced by a move whose unfence is lost; its alarm deleted: only its pusher, retrying its claim, may look.
  const marked = await env.DB.prepare(`UPDATE namespaces SET state = 'moving', epoch = epoch + 1 WHERE ns = ?1 RETURNING epoch, shard`)
    .bind(p.ns)
    .first<{ epoch: number; shard: string }>();
  await queueStub(p.ns, 'a').fence(marked!.epoch);
  await runInDurableObject(queueStub(p.ns, 'a'), (_o, state) => state.storage.deleteAlarm());
  expect(await fenced(p.ns)).toBe(true);
  await endedInDirectoryOnly(p.ns);
  await until(async () => !(await fenced(p.ns)), "the object unfenced by its pusher's claim", 15_000, 50);
  expect((await p.submit('a', 'after')).status).toBe(201);
  expect((await p.result('after', 10_000)).body.state).toBe('succeeded');
});

/** Queue `q`'s object's place and its D1 batches, read inside it (no call of its own, which would start it). */
const placeOf = (ns: string, q: string) =>
  runInDurableObject(queueStub(ns, q), (o) => {
    const x = o as unknown as { place: { placed: boolean; swept: boolean; fenced: boolean }; rows: { batches: number } };
    return { placed: x.place.placed, swept: x.place.swept, fenced: x.place.fenced, batches: x.rows.batches };
  });

/** Ends queue `q`'s object's instance, as Cloudflare evicts an idle one: its next call makes a new one. */
const evict = (ns: string, q: string) => runInDurableObject(queueStub(ns, q), (_o, state) => state.abort('evicted')).catch(() => {});

it('starts a queue object that a move fence made at its next call, on the new shard: its fence and unfence read nothing', async () => {
  const p = plane();
  const base = `/v1/ns/${p.ns}`;
  expect((await p.submit('idle', 'waiting')).status).toBe(201);
  expect((await p.submit('idle', 'later', { delay_ms: 60_000 })).status).toBe(201);
  await evict(p.ns, 'idle');
  const from = await where(p.ns);
  const to = from === 'DB_1' ? 'DB_2' : 'DB_1';
  expect((await call('POST', `${base}/move`, { to })).status).toBe(202);
  let m = (await call('GET', `${base}/move?wait_ms=30000`)).body;
  for (let polls = 0; m.state === 'moving' && polls < 5; polls++) m = (await call('GET', `${base}/move?wait_ms=30000`)).body;
  expect(m).toMatchObject({ state: 'moved', jobs: 2 });
  // Made by the fence's call, told its shard by the unfence: no directory read, no batch, no sweep.
  expect(await placeOf(p.ns, 'idle')).toEqual({ placed: true, swept: false, fenced: false, batches: 0 });
  // Its next call starts it there: it reads its settings and sweeps on the new shard, then claims.
  expect((await p.claim('idle', 'w')).body.claimed.map((c: { id: string }) => c.id)).toEqual(['waiting']);
  expect(await placeOf(p.ns, 'idle')).toMatchObject({ placed: true, swept: true, fenced: false });
  expect(await rowsOn(to, p.ns)).toMatchObject({ jobs: 2 });
  expect((await p.get('later')).body.state).toBe('delayed');
}, 60_000);

it("takes a queue object's shard from a move's unfence that came while its first call read the directory, not from that read", async () => {
  const p = plane();
  expect((await p.submit('a', 'first')).status).toBe(201);
  const from = await where(p.ns);
  const to = from === 'DB_1' ? 'DB_2' : 'DB_1';
  const answer = await runInDurableObject(queueStub(p.ns, 'r'), async (o) => {
    // Its first call reads the directory (the namespace on `from`); a move's fence and unfence
    // (to `to`, at a later epoch) come while that read is out.
    const submitted = o.submit({ id: 'raced', envelope: new TextEncoder().encode('x') });
    await o.fence(1_000);
    await o.unfence(to, 1_000);
    return submitted;
  });
  expect(answer.ok).toBe(true);
  expect(await rowsOn(to, p.ns)).toMatchObject({ jobs: 1 });
  expect(await rowsOn(from, p.ns)).toMatchObject({ jobs: 1 });
  expect(await shardNamed(env, to).db.prepare(`SELECT id FROM invocations WHERE ns = ?1`).bind(p.ns).first('id')).toBe('raced');
});
