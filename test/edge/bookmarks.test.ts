/**
 * Reads and replicas (docs/contract.md; src/durable/bookmark.ts, src/worker/bookmarks.ts): every
 * answer that wrote or read D1 carries `x-lakeshore-bookmark`, the newest point of the namespace's
 * shard it saw; a request that sends one has the Worker's own reads start their D1 session there
 * (a replica at least that new may serve them), and one that sends none reads the primary.
 *
 * Local D1 has one copy and no replica, so what a replica would answer cannot be seen here; what
 * can is the plumbing each guarantee rests on: the bookmarks the plane answers, and the session
 * each read opens (the shards are wrapped to record it, around the real local D1).
 */
import { env } from 'cloudflare:workers';
import { createExecutionContext, waitOnExecutionContext } from 'cloudflare:test';
import { describe, expect, it } from 'vitest';
import { app } from '../../src/worker/app.ts';
import { shardsOf } from '../../src/durable/directory.ts';
import { b64, call, freshNs, plane, TOKEN } from './setup/http.ts';

const HEADER = 'x-lakeshore-bookmark';
const FORM = /^(DB(?:_\d+)?):([0-9a-f]{8}-[0-9a-f]{8}-[0-9a-f]{8}-[0-9a-f]{32})$/;

describe('bookmarks', () => {
  it('answers a bookmark of the namespace shard with each write and read, newer after each write', async () => {
    const p = plane();
    const submitted = await p.submit('q', 'a');
    expect(submitted.status).toBe(201);
    const first = submitted.headers.get(HEADER)!;
    expect(first).toMatch(FORM);
    const shard = FORM.exec(first)![1]!;
    const placed = await env.DB.prepare(`SELECT shard FROM namespaces WHERE ns = ?1`).bind(p.ns).first<{ shard: string }>();
    expect(shard).toBe(placed!.shard);
    await p.claim('q', 'w');
    const acked = await p.ack('a', 'w', { result: b64('done') });
    const later = acked.headers.get(HEADER)!;
    expect(FORM.exec(later)![1]).toBe(shard);
    expect(later > first, `${later} after ${first}`).toBe(true);
    // A read carrying it sees the write, and answers a bookmark at least as new.
    const got = await call('GET', `/v1/ns/${p.ns}/invocations/a`, undefined, { [HEADER]: later });
    expect(got.status).toBe(200);
    expect(got.body.state).toBe('succeeded');
    expect(got.headers.get(HEADER)! >= later).toBe(true);
    // A bookmark of another shard (a namespace that moved) is no use here: the read goes to the primary.
    const other = shardsOf(env).find((s) => s.name !== shard)!.name;
    const elsewhere = await call('GET', `/v1/ns/${p.ns}/queues/q/count?state=succeeded`, undefined, {
      [HEADER]: `${other}:${FORM.exec(later)![2]}`,
    });
    expect(elsewhere.status).toBe(200);
    expect(elsewhere.body.count).toBe(1);
  });

  it('refuses a malformed bookmark with 400, before anything is done', async () => {
    const p = plane();
    const d1 = '00000085-0000024c-00004c6d-8e61117bf38d7adb71b934ebbf891683';
    for (const bad of ['nope', 'DB:', `:${d1}`, `db:${d1}`, 'DB:0000', `DB:${d1.toUpperCase()}`, `DB:${d1}x`, `DB:${'0'.repeat(300)}`]) {
      const r = await call('POST', `/v1/ns/${p.ns}/queues/q/invocations`, { id: 'x', envelope: b64('x') }, { [HEADER]: bad });
      expect(r.status, bad).toBe(400);
      expect(r.body.error.code, bad).toBe('bad_request');
      expect(r.body.error.message, bad).toMatch(/x-lakeshore-bookmark/);
    }
    expect((await p.get('x')).status).toBe(404);
  });

  it("opens each of the Worker's reads in a D1 session from the request's bookmark, or on the primary without one", async () => {
    // The app over the same bindings, its shards wrapped to record the sessions opened on them.
    const opened: string[] = [];
    const wrapped: Record<string, unknown> = { ...env };
    for (const s of shardsOf(env))
      wrapped[s.name] = new Proxy(s.db, {
        get(target, prop) {
          if (prop === 'withSession')
            return (c: string) => {
              opened.push(`${s.name} ${c}`);
              return target.withSession(c);
            };
          const v = Reflect.get(target, prop);
          return typeof v === 'function' ? v.bind(target) : v;
        },
      });
    const fetchVia = async (path: string, init: RequestInit = {}) => {
      const ctx = createExecutionContext();
      const res = await app.fetch(
        new Request(`http://plane${path}`, {
          ...init,
          headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json', ...(init.headers as object) },
        }),
        wrapped as unknown as Env,
        ctx,
      );
      await waitOnExecutionContext(ctx);
      return res;
    };
    const ns = freshNs();
    const made = await fetchVia(`/v1/ns/${ns}/queues/q/invocations`, {
      method: 'POST',
      body: JSON.stringify({ id: 'a', envelope: b64('a') }),
    });
    expect(made.status).toBe(201);
    const bookmark = made.headers.get(HEADER)!;
    const [shard, d1] = [FORM.exec(bookmark)![1]!, FORM.exec(bookmark)![2]!];
    opened.length = 0;
    expect((await fetchVia(`/v1/ns/${ns}/invocations/a`, { headers: { [HEADER]: bookmark } })).status).toBe(200);
    expect(opened).toEqual([`${shard} ${d1}`]);
    opened.length = 0;
    expect((await fetchVia(`/v1/ns/${ns}/queues/q/count?state=queued`)).status).toBe(200);
    expect(opened).toEqual([`${shard} first-primary`]);
  });
});
