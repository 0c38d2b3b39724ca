/**
 * Failures of the platform that a retry gets past are answered so that clients retry them
 * (core/platform-errors.ts): D1's transient errors, as Cloudflare's guidance on retrying queries
 * names them, are a 503 `unavailable`; D1 overloaded is a 429 with its Retry-After. Before, each
 * was a 500 `internal error`, which the clients do not retry. The runtime here cannot lose its
 * connection to D1, so the failure is put into the queue object's port: one batch fails.
 */
import { runInDurableObject } from 'cloudflare:test';
import { describe, expect, it } from 'vitest';
import { plane } from './setup/http.ts';
import { queueStub, rows } from './setup/objects.ts';

/**
 * The queue object's next D1 batch fails with `message`, as D1 would answer it; the ones after go
 * through. Its port's database is wrapped: the port's own handling of the failure is what is tested.
 */
async function failNextBatch(ns: string, queue: string, message: string) {
  await runInDurableObject(queueStub(ns, queue), (o) => {
    const port = (o as unknown as { port: { db: D1Database } }).port;
    const real = port.db;
    let left = 1;
    port.db = new Proxy(real, {
      get(target, key) {
        if (key !== 'withSession') return Reflect.get(target, key);
        return (c: string) =>
          new Proxy(target.withSession(c), {
            get(session, k) {
              const v = Reflect.get(session, k);
              if (k !== 'prepare') return typeof v === 'function' ? v.bind(session) : v;
              return (sql: string) => {
                if (left-- > 0) throw new Error(message);
                return session.prepare(sql);
              };
            },
          });
      },
    });
  });
}

describe("the platform's passing failures", () => {
  it('answers a D1 connection lost as 503 unavailable, changing nothing, and the retry goes through', async () => {
    const p = plane();
    expect((await p.submit('q', 'first')).status).toBe(201);
    const before = await rows(p.ns);
    await failNextBatch(p.ns, 'q', 'D1_ERROR: Network connection lost.');
    const r = await p.submit('q', 'a');
    expect(r.status).toBe(503);
    expect(r.body.error.code).toBe('unavailable');
    expect(r.body.error.message).toMatch(/Network connection lost/);
    expect(await rows(p.ns)).toEqual(before);
    expect((await p.submit('q', 'a')).status).toBe(201);
    expect((await p.get('a')).body.state).toBe('queued');
  });

  it('answers D1 overloaded as 429 with a Retry-After, and a reset object as 503', async () => {
    const p = plane();
    expect((await p.submit('q', 'first')).status).toBe(201);
    await failNextBatch(p.ns, 'q', 'D1_ERROR: D1 DB is overloaded. Requests queued for too long.');
    const r = await p.claim('q', 'w');
    expect(r.status).toBe(429);
    expect(r.body.error.code).toBe('rate_limited');
    expect(r.headers.get('retry-after')).toBe('1');
    await failNextBatch(p.ns, 'q', 'D1_ERROR: Internal error while starting up D1 DB storage caused object to be reset.');
    expect((await p.claim('q', 'w')).status).toBe(503);
    expect((await p.claim('q', 'w')).body.claimed.map((c: { id: string }) => c.id)).toEqual(['first']);
  });

  it('still answers any other failure as 500 internal error, its detail kept out of the answer', async () => {
    const p = plane();
    expect((await p.submit('q', 'first')).status).toBe(201);
    await failNextBatch(p.ns, 'q', 'D1_ERROR: no such column: secret_detail');
    const r = await p.submit('q', 'a');
    expect(r.status).toBe(500);
    expect(r.body.error).toEqual({ code: 'internal', message: 'internal error' });
  });
});
