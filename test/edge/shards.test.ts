/**
 * Shards (src/durable/directory.ts): this suite's plane has three D1 databases. A new namespace is
 * placed on one, its rows land there and nowhere else, and every reader reaches it there.
 */
import { env } from 'cloudflare:workers';
import { describe, expect, it } from 'vitest';
import { place, shardBytes, shardNamed, shardsOf } from '../../src/durable/directory.ts';
import { b64, call, plane } from './setup/http.ts';
import { queueStub } from './setup/objects.ts';

const where = async (ns: string) =>
  (await env.DB.prepare(`SELECT shard FROM namespaces WHERE ns = ?1`).bind(ns).first<{ shard: string }>())?.shard ?? null;

describe('shards', () => {
  it('puts each namespace on one shard, all its rows there and on no other, and reads it from there', async () => {
    expect(shardsOf(env).map((s) => s.name)).toEqual(['DB', 'DB_1', 'DB_2']);
    const planes = Array.from({ length: 6 }, () => plane());
    for (const p of planes) {
      await p.submit('q', 'a');
      await p.claim('q', 'w');
      await p.append('a', 'w', { seq: 0 });
      await p.ack('a', 'w', { result: b64('done') });
      await p.configure('q', { max_attempts: 5 });
    }
    const placed = await Promise.all(planes.map((p) => where(p.ns)));
    expect(new Set(placed).size, `the namespaces' shards: ${placed.join(', ')}`).toBe(3);
    for (const [i, p] of planes.entries()) {
      expect((await queueStub(p.ns, 'q').stats()).shard).toBe(placed[i]);
      for (const s of shardsOf(env)) {
        const n = await s.db
          .prepare(
            `SELECT (SELECT count(*) FROM invocations WHERE ns = ?1) + (SELECT count(*) FROM queues WHERE ns = ?1)
                  + (SELECT count(*) FROM frames WHERE inv IN (SELECT rid FROM invocations WHERE ns = ?1)) AS n`,
          )
          .bind(p.ns)
          .first<{ n: number }>();
        expect(n!.n, `${p.ns}'s rows on ${s.name}`).toBe(s.name === placed[i] ? 3 : 0);
      }
      // The Worker's own reads (get, count, a journal page, a listing) find them on their shard.
      expect((await p.get('a')).body.state).toBe('succeeded');
      expect((await p.count('q', 'succeeded')).body.count).toBe(1);
      expect((await p.read('a')).body.frames).toHaveLength(1);
      expect((await call('GET', `/v1/ns/${p.ns}/queues/q/invocations?state=succeeded`)).body.items).toHaveLength(1);
    }
  });

  it('places a new namespace once, however many callers place it at the same moment', async () => {
    const ns = `race${Date.now().toString(36)}`;
    const got = await Promise.all(Array.from({ length: 12 }, () => place(env, ns, 10_000_000_000)));
    expect(new Set(got.map((g) => g.shard)).size).toBe(1);
    expect(await where(ns)).toBe(got[0]!.shard);
  });

  it("keeps the tokens in the home database, whatever the namespace's shard", async () => {
    const p = plane();
    const made = await call('POST', `/v1/ns/${p.ns}/tokens`, { role: 'producer' });
    expect(made.status).toBe(201);
    const home = await env.DB.prepare(`SELECT count(*) AS n FROM tokens WHERE ns = ?1`).bind(p.ns).first<{ n: number }>();
    expect(home!.n).toBe(1);
    const other = await call(
      'POST',
      `/v1/ns/${p.ns}/queues/q/invocations`,
      { id: 'x', envelope: b64('x') },
      { authorization: `Bearer ${made.body.token}` },
    );
    expect(other.status).toBe(201);
  });

  it("shows the operator each shard's storage and namespaces (GET /v1/shards), and the namespaces on one, a page at a time", async () => {
    const planes = Array.from({ length: 4 }, () => plane());
    for (const p of planes) expect((await p.submit('q', 'a')).status).toBe(201);
    const all = await call('GET', '/v1/shards');
    expect(all.status).toBe(200);
    expect(all.body.shards.map((s: { shard: string }) => s.shard)).toEqual(['DB', 'DB_1', 'DB_2']);
    const counts = await env.DB.prepare(`SELECT shard, count(*) AS n FROM namespaces GROUP BY shard`).all<{ shard: string; n: number }>();
    for (const s of all.body.shards) {
      expect(Object.keys(s).sort()).toEqual(['bytes', 'full', 'high_water_bytes', 'limit_bytes', 'namespaces', 'shard']);
      // As each shard's database reports itself, against the plane's budget.
      expect(s.bytes).toBe(await shardBytes(shardNamed(env, s.shard).db));
      expect(s.high_water_bytes).toBe(Math.floor(s.limit_bytes * 0.9));
      expect(s.full).toBe(s.bytes >= s.high_water_bytes);
      expect(s.namespaces).toBe(counts.results.find((r) => r.shard === s.shard)?.n ?? 0);
    }
    // The namespaces of one shard, walked a page of one at a time: each once, in name order.
    const shard = (await where(planes[0]!.ns))!;
    const walked: string[] = [];
    for (let after = '', pages = 0; after !== null && pages < 1000; pages++) {
      const page = await call('GET', `/v1/shards/${shard}/namespaces?limit=1${after ? `&after=${after}` : ''}`);
      expect(page.status).toBe(200);
      walked.push(...page.body.namespaces.map((n: { namespace: string; state: string }) => `${n.namespace}:${n.state}`));
      after = page.body.next;
    }
    const there = (await env.DB.prepare(`SELECT ns FROM namespaces WHERE shard = ?1 ORDER BY ns`).bind(shard).all<{ ns: string }>())
      .results;
    expect(walked).toEqual(there.map((r) => `${r.ns}:active`));
    expect(walked).toContain(`${planes[0]!.ns}:active`);
    const whole = await call('GET', `/v1/shards/${shard}/namespaces`);
    expect(whole.body).toMatchObject({ next: null });
    expect(whole.body.namespaces[0]).toEqual({ namespace: there[0]!.ns, state: 'active', placed_at: expect.any(Number) });
    // Bad input: an unknown shard, a limit out of range, an after that is no namespace name.
    const unknown = await call('GET', '/v1/shards/DB_7/namespaces');
    expect([unknown.status, unknown.body.error.code, unknown.body.error.message]).toEqual([
      404,
      'not_found',
      'no shard "DB_7": the plane has DB, DB_1, DB_2',
    ]);
    for (const q of ['limit=0', 'limit=1001', 'limit=x', 'after=%20bad'])
      expect((await call('GET', `/v1/shards/DB/namespaces?${q}`)).status, q).toBe(400);
    // A namespace's admin token is not the operator's.
    const admin = (await call('POST', `/v1/ns/${planes[0]!.ns}/tokens`, { role: 'admin' })).body.token as string;
    const refused = await call('GET', '/v1/shards', undefined, { authorization: `Bearer ${admin}` });
    expect([refused.status, refused.body.error.message]).toEqual([
      403,
      "only the deployment's root token may look at the deployment's shards",
    ]);
  });
});
