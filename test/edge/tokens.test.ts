/** Scoped tokens: roles, pools, namespaces, revocation, and digests instead of secrets at rest. */
import { env } from 'cloudflare:workers';
import { describe, expect, it } from 'vitest';
import { b64, call, freshNs } from './setup/http.ts';
import { cachedToken } from '../../src/worker/token-cache.ts';
import { SPARE_MS } from '../../src/worker/admission.ts';

const as = (token: string) => ({ authorization: `Bearer ${token}` });

async function mint(ns: string, role: string, pools?: string[]) {
  const r = await call('POST', `/v1/ns/${ns}/tokens`, { role, pools, name: `${role} for tests` });
  expect(r.status).toBe(201);
  return r.body as { token: string; id: string; role: string; pools: string[] | null };
}

describe('scoped tokens', () => {
  it('are random, prefixed, shown once, and stored only as a SHA-256 digest', async () => {
    const ns = freshNs();
    const t = await mint(ns, 'producer');
    expect(t.token).toMatch(/^lsk_[a-z0-9]{16}_[A-Za-z0-9_-]{43}$/); // 32 random bytes
    expect(t.token.startsWith(`lsk_${t.id}_`)).toBe(true);
    const listed = (await call('GET', `/v1/ns/${ns}/tokens`)).body.tokens;
    expect(listed).toEqual([expect.objectContaining({ id: t.id, role: 'producer', revoked_at: null })]);
    expect(JSON.stringify(listed)).not.toContain(t.token.slice(21));
    const row = await env.DB.prepare(`SELECT * FROM tokens WHERE id = ?1`).bind(t.id).first<Record<string, string>>();
    expect(JSON.stringify(row)).not.toContain(t.token.slice(21));
    expect(row!.digest).toMatch(/^[0-9a-f]{64}$/);
  });

  it('lets a producer submit and read, and nothing a worker or admin does', async () => {
    const ns = freshNs();
    const p = (await mint(ns, 'producer')).token;
    const base = `/v1/ns/${ns}`;
    expect((await call('POST', `${base}/queues/q/invocations`, { id: 'a', envelope: b64('x') }, as(p))).status).toBe(201);
    expect((await call('GET', `${base}/invocations/a`, undefined, as(p))).status).toBe(200);
    expect((await call('GET', `${base}/queues/q/count`, undefined, as(p))).status).toBe(200);
    expect((await call('GET', `${base}/invocations/a/journal`, undefined, as(p))).status).toBe(200);
    for (const [m, path, body] of [
      ['POST', `${base}/queues/q/claim`, { worker_id: 'w' }],
      ['POST', `${base}/invocations/a/ack`, { worker_id: 'w' }],
      ['PUT', `${base}/queues/q`, { lease_ms: 1000 }],
      ['GET', `${base}/tokens`, undefined],
    ] as const) {
      const r = await call(m, path, body, as(p));
      expect(r.status, `${m} ${path}`).toBe(403);
      expect(r.body.error.code).toBe('forbidden');
    }
    expect((await call('GET', `${base}/queues/q/count?state=running`)).body.count).toBe(0); // the refused claim changed nothing
    // A refusal says what was refused in words, and who may.
    expect((await call('GET', `${base}/tokens`, undefined, as(p))).body.error.message).toBe(
      'a producer token may not manage tokens (an admin token may)',
    );
    expect((await call('POST', `${base}/queues/q/claim`, { worker_id: 'w' }, as(p))).body.error.message).toBe(
      'a producer token may not claim (a worker or admin token may)',
    );
  });

  it('lets a worker serve only its pools, and not submit', async () => {
    const ns = freshNs();
    const base = `/v1/ns/${ns}`;
    const w = (await mint(ns, 'worker', ['gpu'])).token;
    await call('POST', `${base}/queues/gpu/invocations`, { id: 'g', envelope: b64('x') });
    await call('POST', `${base}/queues/cpu/invocations`, { id: 'c', envelope: b64('x') });
    expect((await call('POST', `${base}/queues/gpu/claim`, { worker_id: 'w' }, as(w))).body.claimed[0].id).toBe('g');
    expect((await call('POST', `${base}/invocations/g/journal`, { worker_id: 'w', kind: 0, body: b64('v') }, as(w))).status).toBe(200);
    expect((await call('POST', `${base}/invocations/g/ack`, { worker_id: 'w' }, as(w))).status).toBe(200);
    const other = await call('POST', `${base}/queues/cpu/claim`, { worker_id: 'w' }, as(w));
    expect([other.status, other.body.error.message]).toEqual([
      403,
      expect.stringMatching(/^token \w+ may not claim on queue "cpu": its pools are "gpu"$/),
    ]);
    await call('POST', `${base}/queues/cpu/claim`, { worker_id: 'root-worker' });
    expect((await call('POST', `${base}/invocations/c/ack`, { worker_id: 'root-worker' }, as(w))).status).toBe(403);
    expect((await call('POST', `${base}/queues/gpu/invocations`, { id: 'x', envelope: b64('x') }, as(w))).status).toBe(403);
    // It waits on the results of its pools' jobs (how it hears a cancel), and of no other queue's.
    expect((await call('POST', `${base}/queues/gpu/results`, { ids: ['g'], timeout_ms: 0 }, as(w))).body.results[0].id).toBe('g');
    expect((await call('GET', `${base}/invocations/g/result?timeout_ms=0`, undefined, as(w))).status).toBe(200);
    expect((await call('POST', `${base}/queues/cpu/results`, { ids: ['c'], timeout_ms: 0 }, as(w))).status).toBe(403);
    expect((await call('GET', `${base}/invocations/c/result?timeout_ms=0`, undefined, as(w))).status).toBe(403);
  });

  it('refuses pools for a token they would not limit, and an empty list, creating nothing', async () => {
    const ns = freshNs();
    for (const [role, pools, says] of [
      ['producer', ['gpu'], 'pools limit a worker token; a producer token acts on every queue of its namespace'],
      ['admin', ['gpu'], 'pools limit a worker token; an admin token'],
      ['worker', [], 'pools, when given, names at least one queue'],
    ] as const) {
      const r = await call('POST', `/v1/ns/${ns}/tokens`, { role, pools });
      expect(r.status, `${role} ${JSON.stringify(pools)}`).toBe(400);
      expect(r.body.error).toMatchObject({ code: 'bad_request', message: expect.stringContaining(says) });
    }
    expect((await call('GET', `/v1/ns/${ns}/tokens`)).body.tokens).toEqual([]);
  });

  it('keeps a token inside its namespace: another namespace is 403, a guessed id 404', async () => {
    const ns = freshNs();
    const other = freshNs();
    await call('POST', `/v1/ns/${other}/queues/q/invocations`, { id: 'secret', envelope: b64('x') });
    const admin = (await mint(ns, 'admin')).token;
    const r = await call('GET', `/v1/ns/${other}/invocations/secret`, undefined, as(admin));
    expect(r.status).toBe(403);
    expect(r.body.error.message).not.toContain('secret');
    expect((await call('GET', `/v1/ns/${ns}/invocations/secret`, undefined, as(admin))).status).toBe(404);
    expect((await call('POST', `/v1/ns/${ns}/tokens`, { role: 'worker' }, as(admin))).status).toBe(201); // a namespace admin manages its tokens
    expect((await call('POST', `/v1/ns/${other}/tokens`, { role: 'admin' }, as(admin))).status).toBe(403);
  });

  it('refuses a revoked token within a second in an isolate that has it cached, through its gate; at once where it is not cached', async () => {
    const ns = freshNs();
    const t = await mint(ns, 'producer');
    // Cached here, with spare permits held: requests now cost no D1 read and no gate call.
    for (let i = 0; i < 5; i++) expect((await call('GET', `/v1/ns/${ns}/queues/q/count`, undefined, as(t.token))).status).toBe(200);
    expect(cachedToken(t.id)?.principal).toMatchObject({ ns, role: 'producer' });
    const t0 = Date.now();
    expect((await call('DELETE', `/v1/ns/${ns}/tokens/${t.id}`)).body).toEqual({ revoked: true });
    // The revoke does not touch this isolate's cache: the gate's answer is what reaches every isolate.
    expect(cachedToken(t.id)).toBeDefined();
    let r = await call('GET', `/v1/ns/${ns}/queues/q/count`, undefined, as(t.token));
    while (r.status === 200 && Date.now() - t0 < 5_000) r = await call('GET', `/v1/ns/${ns}/queues/q/count`, undefined, as(t.token));
    expect(r.status).toBe(401);
    expect(r.body.error.code).toBe('unauthorized');
    expect(Date.now() - t0, 'the staleness bound: SPARE_MS (1 s), well within the 5 s promised').toBeLessThanOrEqual(SPARE_MS + 4_000);
    expect(cachedToken(t.id)).toBeUndefined();
    // An isolate that never cached it reads the row, which says revoked: refused at once.
    expect((await call('GET', `/v1/ns/${ns}/queues/q/count`, undefined, as(t.token))).status).toBe(401);
    expect((await call('DELETE', `/v1/ns/${ns}/tokens/${t.id}`)).body).toEqual({ revoked: false });
    expect((await call('DELETE', `/v1/ns/${ns}/tokens/nope`)).status).toBe(404);
    expect((await call('GET', `/v1/ns/${ns}/queues/q/count`, undefined, as(`lsk_${t.id}_${'A'.repeat(43)}`))).status).toBe(401);
    expect((await call('GET', `/v1/ns/${ns}/queues/q/count`, undefined, as('lsk_garbage'))).status).toBe(401);
    expect((await call('POST', `/v1/ns/${ns}/tokens`, { role: 'superuser' })).status).toBe(400);
  });
});
