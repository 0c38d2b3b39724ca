/**
 * A namespace's move in steps (src/durable/mover.ts, copy.ts): this suite's plane lets a step ask
 * 24 statements and calls (MOVE_STEP_SUBREQUESTS, vitest.edge.config.ts), so a few hundred jobs
 * take dozens of the mover's invocations. What the move under load does is test/node/move.test.ts.
 */
import { env } from 'cloudflare:workers';
import { expect, it } from 'vitest';
import { shardNamed } from '../../src/durable/directory.ts';
import { b64, call, plane, unb64 } from './setup/http.ts';

const N = 400;
const STEP = 24;

const where = async (ns: string) =>
  (await env.DB.prepare(`SELECT shard FROM namespaces WHERE ns = ?1`).bind(ns).first<{ shard: string }>())!.shard;

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

it('moves a namespace in steps within their bound, reading the rows it copies only, its claim order and journals whole', async () => {
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
  const before = await rowsOn(from, p.ns);
  expect(before).toEqual({ jobs: N, frames: 210, due: 20, queues: 2 });

  const started = await call('POST', `${base}/move`, { to });
  expect(started.status, JSON.stringify(started.body)).toBe(202);
  expect(started.body).toMatchObject({ namespace: p.ns, from, to, state: 'moving' });
  let m = started.body;
  for (let polls = 0; m.state === 'moving' && polls < 20; polls++) m = (await call('GET', `${base}/move?wait_ms=30000`)).body;
  console.log(`[move] ${JSON.stringify(m)}`);
  expect(m).toMatchObject({ state: 'moved', phase: 'ended', jobs: N, frames: 210, queues: 2, error: null });
  // Many steps, none past its bound.
  expect(m.steps).toBeGreaterThan(20);
  expect(m.most_subrequests_a_step).toBeLessThanOrEqual(STEP);
  // Every page read along an index: what the copy read (both shards, the check of both included)
  // stays within a few rows a row. Read by a sort of the namespace's rows for each page, 400 jobs
  // read about 20 times as many.
  const copied = N + 210 + 20 + 2;
  expect(m.rows_read, `rows read for ${copied} rows copied`).toBeLessThan(12 * copied);
  expect(await rowsOn(to, p.ns)).toEqual(before);
  expect(await where(p.ns)).toBe(to);

  // On the new shard: the rest claimed in the order they would have been, the journals whole.
  const rest: string[] = [];
  for (let got = 1; got; ) {
    const page = (await p.claim('a', 'w2', { max: 100 })).body.claimed.map((c: { id: string }) => c.id);
    rest.push(...page);
    got = page.length;
  }
  expect(rest).toEqual(order.slice(30).map(id));
  const long = (await p.read(claimed[0])).body;
  expect(long.frames.map((f: { seq: number; body: string }) => `${f.seq}:${unb64(f.body)}`)).toEqual(
    Array.from({ length: 150 }, (_, s) => `${s}:f${s}`),
  );
  for (const j of claimed.slice(1, 21)) {
    const got = (await p.get(j)).body;
    expect(got).toMatchObject({ state: 'succeeded', result: b64(`r-${j}`) });
    expect((await p.read(j)).body.frames.map((f: { body: string }) => unb64(f.body))).toEqual([0, 1, 2].map((s) => `${j}.${s}`));
  }
  // The running ones are still held by their worker, and finish.
  expect((await p.ack(claimed[29], 'w', { result: b64('late') })).status).toBe(200);
  expect((await call('GET', `${base}/queues/b`)).body.settings).toMatchObject({ lease_ms: 12_345 });
}, 120_000);
