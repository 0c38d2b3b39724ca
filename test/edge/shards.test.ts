/**
 * Shards (src/durable/directory.ts): this suite's plane has three D1 databases. A new namespace is
 * placed on one, its rows land there and nowhere else, and every reader reaches it there.
 */
import { env } from 'cloudflare:workers';
import { describe, expect, it } from 'vitest';
import { place, shardsOf } from '../../src/durable/directory.ts';
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
});
