/**
 * The authorization matrix: every route × {own namespace with the right role, another namespace,
 * a guessed id, no token, a revoked token, the wrong role}. Cross-tenant successes must be 0, and
 * the test fails when a route exists without an entry here.
 */
import { describe, expect, it } from 'vitest';
import { app } from '../../src/worker/app.ts';
import { b64, call, freshNs } from './setup/http.ts';
import { eventually } from '../support/wait.ts';
import { env } from 'cloudflare:workers';
import { place } from '../../src/durable/directory.ts';
import { mintDeliveryToken } from '../../src/core/delivery-token.ts';
import { signingKeys } from '../../src/core/signing.ts';

type Role = 'producer' | 'worker' | 'admin';
interface Entry {
  /** Roles (besides admin) that may use the route. */
  roles: Role[];
  /** Names an invocation by id (so a guessed id must be 404). */
  byId?: boolean;
  body?: (id: string) => unknown;
  /** A query the route needs (`:queue` is the route's queue), or each of its variants. */
  query?: string | string[];
  /** Brings the route's target into the state its success needs (as root). */
  setup?: (base: string, q: string, id: string) => Promise<unknown>;
  /** Headers the route needs besides the token. */
  headers?: Record<string, string>;
  /** The deployment's operator only: the root token, never a namespace's admin. */
  rootOnly?: true;
  /** A body made for the namespace the route is called in (`body` when it depends on it). */
  bodyFor?: (ns: string) => Promise<unknown>;
}

/** A shard the namespace is not on (test/edge/shards.test.ts: three of them). */
const otherShard = async (ns: string) => ({ to: (await place(env, ns, 10_000_000_000)).shard === 'DB_2' ? 'DB_1' : 'DB_2' });

/** A code archive and its digest (routes/code.ts). */
const ARCHIVE = 'archive';
const ARCHIVE_DIGEST = { 'content-digest': 'sha-256=:DrPja/sk3Nm7HRvs4VMSFrWVOaj94X7oAiSvBlPJKqM=:' };
const STAMP = 'c'.repeat(40);
const pushed = (base: string) => call('PUT', `${base}/code/${STAMP}`, ARCHIVE, ARCHIVE_DIGEST);

/** Fails the invocation `id` of queue `q` (for retry and delete). */
const failed = async (base: string, q: string, id: string) => {
  await call('POST', `${base}/queues/${q}/claim`, { worker_id: 'setup' });
  await call('POST', `${base}/invocations/${id}/nack`, { worker_id: 'setup', error: 'x', retry: false });
};

const MATRIX: Record<string, Entry> = {
  'GET /v1/ns/:ns/queues': { roles: ['producer', 'worker'] },
  'POST /v1/ns/:ns/queues/:queue/invocations': { roles: ['producer'], body: (id) => ({ id: `${id}-new`, envelope: b64('x') }) },
  'POST /v1/ns/:ns/queues/:queue/invocations/batch': {
    roles: ['producer'],
    body: (id) => ({ items: [{ id: `${id}-b`, envelope: b64('x') }] }),
  },
  'POST /v1/ns/:ns/queues/:queue/claim': { roles: ['worker'], body: () => ({ worker_id: 'w' }) },
  'POST /v1/ns/:ns/queues/:queue/claim/cancel': { roles: ['worker'], body: () => ({ worker_id: 'w', claim_id: 'c' }) },
  'POST /v1/ns/:ns/queues/:queue/ack': { roles: ['worker'], body: (id) => ({ items: [{ id, worker_id: 'w' }] }) },
  'POST /v1/ns/:ns/queues/:queue/nack': { roles: ['worker'], body: (id) => ({ items: [{ id, worker_id: 'w', error: 'x' }] }) },
  'POST /v1/ns/:ns/queues/:queue/release': { roles: ['worker'], body: (id) => ({ worker_id: 'w', items: [{ id, attempt: 1 }] }) },
  'GET /v1/ns/:ns/queues/:queue/count': { roles: ['producer'] },
  'GET /v1/ns/:ns/queues/:queue/invocations': { roles: ['producer'] },
  'PUT /v1/ns/:ns/queues/:queue': { roles: [], body: () => ({ lease_ms: 5000 }) },
  'GET /v1/ns/:ns/queues/:queue/stats': { roles: ['producer', 'worker'] },
  'GET /v1/ns/:ns/queues/:queue': { roles: ['producer', 'worker'] },
  'POST /v1/ns/:ns/queues/:queue/pause': { roles: [] },
  'POST /v1/ns/:ns/queues/:queue/resume': { roles: [] },
  'POST /v1/ns/:ns/queues/:queue/redrive': { roles: ['producer'], body: () => ({ limit: 10 }) },
  'GET /v1/ns/:ns/queues/:queue/schedules': { roles: [] },
  'PUT /v1/ns/:ns/queues/:queue/schedules/:name': { roles: [], body: () => ({ cron: '0 0 1 1 *', envelope: b64('x') }) },
  'DELETE /v1/ns/:ns/queues/:queue/schedules/:name': {
    roles: [],
    setup: (base, q) => call('PUT', `${base}/queues/${q}/schedules/nightly`, { cron: '0 0 1 1 *', envelope: b64('x') }),
  },
  'POST /v1/ns/:ns/invocations/:id/retry': { roles: ['producer'], byId: true, setup: failed },
  'DELETE /v1/ns/:ns/invocations/:id': { roles: ['producer'], byId: true, setup: failed },
  'POST /v1/ns/:ns/queues/:queue/purge': { roles: [], body: () => ({ state: 'failed' }) },
  'GET /v1/ns/:ns/invocations/:id': { roles: ['producer'], byId: true },
  'GET /v1/ns/:ns/invocations/:id/result': { roles: ['producer', 'worker'], byId: true },
  'POST /v1/ns/:ns/invocations/get': { roles: ['producer'], body: (id) => ({ ids: [id] }) },
  'POST /v1/ns/:ns/queues/:queue/results': { roles: ['producer', 'worker'], body: (id) => ({ ids: [id], timeout_ms: 0 }) },
  'POST /v1/ns/:ns/invocations/:id/ack': { roles: ['worker'], byId: true, body: () => ({ worker_id: 'w' }) },
  'POST /v1/ns/:ns/invocations/:id/nack': { roles: ['worker'], byId: true, body: () => ({ worker_id: 'w', error: 'x' }) },
  'POST /v1/ns/:ns/invocations/:id/heartbeat': { roles: ['worker'], byId: true, body: () => ({ worker_id: 'w' }) },
  'POST /v1/ns/:ns/invocations/:id/cancel': { roles: ['producer'], byId: true },
  'POST /v1/ns/:ns/invocations/:id/journal': { roles: ['worker'], byId: true, body: () => ({ worker_id: 'w', kind: 0, body: b64('x') }) },
  'GET /v1/ns/:ns/invocations/:id/journal': { roles: ['producer'], byId: true },
  'POST /v1/ns/:ns/invocations/:id/journal/trim': { roles: ['producer'], byId: true, body: () => ({ keep_last: 0 }) },
  'POST /v1/ns/:ns/invocations/:id/stream-token': { roles: ['producer'], byId: true, body: () => ({ ttl_ms: 60_000 }) },
  'POST /v1/ns/:ns/tokens': { roles: [], body: () => ({ role: 'producer' }) },
  'GET /v1/ns/:ns/metrics': { roles: ['producer', 'worker'] },
  'GET /v1/ns/:ns/storage': { roles: ['producer', 'worker'] },
  'GET /v1/ns/:ns/queue-names': { roles: ['producer', 'worker'] },
  'GET /v1/ns/:ns/workers': { roles: ['producer', 'worker'] },
  'POST /v1/ns/:ns/queues/:queue/workers/:worker/stop': { roles: ['worker'] },
  'POST /v1/ns/:ns/queues/:queue/workers/:worker/log': {
    roles: ['worker'],
    body: () => ({ lines: [{ id: 'j', level: 'info', message: 'step 1' }] }),
  },
  // One queue's feed, and the namespace's.
  'GET /v1/ns/:ns/events': { roles: ['producer', 'worker'], query: ['?queue=:queue', '', '?queue=:queue&batch=1', '?batch=1'] },
  'PUT /v1/ns/:ns/code/:stamp': { roles: ['producer'], body: () => ARCHIVE, headers: ARCHIVE_DIGEST },
  // GET fetches (worker); HEAD, answered by the same route, asks (producer or worker): code.test.ts.
  'GET /v1/ns/:ns/code/:stamp': { roles: ['worker'], setup: (base) => pushed(base) },
  'POST /v1/ns/:ns/move': { roles: [], rootOnly: true, bodyFor: otherShard },
  // Where the move just started is (it waits for its end, so nothing of it runs past the test).
  'GET /v1/ns/:ns/move': { roles: [], rootOnly: true, query: ['?wait_ms=30000'] },
  // The deployment's shards: of no namespace, so "another namespace" is the same route.
  'GET /v1/shards': { roles: [], rootOnly: true },
  'GET /v1/shards/:shard/namespaces': { roles: [], rootOnly: true, query: ['', '?limit=1'] },
  // The producer's token is revoked by the last one: these come last.
  'GET /v1/ns/:ns/tokens': { roles: [] },
  'DELETE /v1/ns/:ns/tokens/:id': { roles: [] },
};

/** Routes with no token: health, and the dashboard's shell (its page and script carry no data; the page asks for a token). */
const PUBLIC = new Set(['GET /health', 'GET ', 'GET /dashboard.js', 'GET /favicon.ico']);

const routes = () =>
  [...new Set(app.routes.filter((r) => r.method !== 'ALL').map((r) => `${r.method} ${r.path.replace(/\/$/, '')}`))].filter(
    (r) => !PUBLIC.has(r),
  );

async function mint(ns: string, role: Role) {
  return (await call('POST', `/v1/ns/${ns}/tokens`, { role })).body as { token: string; id: string };
}

describe('authorization matrix', () => {
  it('has an entry for every route the app serves', () => {
    expect(routes().sort()).toEqual(Object.keys(MATRIX).sort());
  });

  it('allows only the right role in the right namespace; cross-tenant successes: 0', async () => {
    const ns = freshNs();
    const other = freshNs();
    const tokens = { producer: await mint(ns, 'producer'), worker: await mint(ns, 'worker'), admin: await mint(ns, 'admin') };
    const foreign = await mint(other, 'admin');
    const revoked = await mint(ns, 'admin');
    await call('DELETE', `/v1/ns/${ns}/tokens/${revoked.id}`);
    let crossTenant = 0;
    let checked = 0;
    for (const [route, e] of Object.entries(MATRIX)) {
      for (const [k, variant] of (Array.isArray(e.query) ? e.query : [e.query ?? '']).entries()) {
        const [method, template] = route.split(' ') as [string, string];
        // A fresh queue and invocation per route (and variant), in both namespaces.
        const id = `inv${checked}-${k}`;
        const q = `q${checked}-${k}`;
        for (const n of [ns, other]) await call('POST', `/v1/ns/${n}/queues/${q}/invocations`, { id, envelope: b64('x') });
        const query = route.endsWith('/result') ? '?timeout_ms=0' : variant.replace(':queue', q);
        const path = (n: string, inv = id) =>
          template
            .replace(':ns', n)
            .replace(':queue', q)
            .replace(':name', 'nightly')
            .replace(':worker', 'w')
            .replace(':stamp', STAMP)
            .replace(':shard', 'DB')
            .replace(':id', route.includes('/tokens/') ? tokens.producer.id : inv) + query;
        const body = e.bodyFor ? await e.bodyFor(ns) : e.body?.(id);
        const as = (t: string | null) => ({ ...e.headers, authorization: t === null ? '' : `Bearer ${t}` });

        const none = await call(method, path(ns), body, as(null));
        expect(none.status, `${route} without a token`).toBe(401);
        const gone = await call(method, path(ns), body, as(revoked.token));
        expect(gone.status, `${route} with a revoked token`).toBe(401);
        const cross = await call(method, path(other), body, as(tokens.admin.token));
        if (cross.status < 300) crossTenant++;
        expect(cross.status, `${route} on another namespace`).toBe(403);
        const foreignIn = await call(method, path(ns), body, as(foreign.token));
        if (foreignIn.status < 300) crossTenant++;
        expect(foreignIn.status, `${route} with another namespace's token`).toBe(403);
        for (const role of e.rootOnly ? (['producer', 'worker', 'admin'] as const) : (['producer', 'worker'] as const)) {
          if (e.roles.includes(role)) continue;
          const wrong = await call(method, path(ns), body, as(tokens[role].token));
          expect(wrong.status, `${route} as ${role}`).toBe(403);
          expect(wrong.body.error.code).toBe('forbidden');
        }
        if (e.byId) {
          const guessed = await call(method, path(ns, `guess-${id}`), body, as(tokens.admin.token));
          expect(guessed.status, `${route} with a guessed id`).toBe(404);
        }
        const role = e.roles[0] ?? 'admin';
        await e.setup?.(`/v1/ns/${ns}`, q, id);
        if (e.rootOnly) {
          const ok = await call(method, path(ns), body);
          expect(ok.status, `${route} as root: ${JSON.stringify(ok.body)}`).toBeLessThan(300);
          continue;
        }
        if (role === 'worker' && (e.byId || route.endsWith('/ack') || route.endsWith('/nack')))
          await call('POST', `/v1/ns/${ns}/queues/${q}/claim`, { worker_id: 'w' }, as(tokens.worker.token));
        const ok = await call(method, path(ns), body, as(tokens[role].token));
        expect(ok.status, `${route} as ${role}: ${JSON.stringify(ok.body)}`).toBeLessThan(300);
      }
      checked++;
    }
    expect(crossTenant).toBe(0);
    expect(checked).toBe(Object.keys(MATRIX).length);
  }, 60_000);

  it("reads many jobs' rows of its own namespace only, though another holds the same ids", async () => {
    const ns = freshNs();
    const other = freshNs();
    for (const [n, q] of [
      [ns, 'mine'],
      [other, 'theirs'],
    ] as const)
      for (const id of ['a', 'b']) await call('POST', `/v1/ns/${n}/queues/${q}/invocations`, { id, envelope: b64('x') });
    await call('POST', `/v1/ns/${other}/queues/theirs/invocations`, { id: 'c', envelope: b64('x') });
    const r = await call('POST', `/v1/ns/${ns}/invocations/get`, { ids: ['b', 'c', 'a'] });
    expect(r.status).toBe(200);
    expect(r.body.items.map((i: { id: string; namespace: string; queue: string } | null) => i && [i.id, i.namespace, i.queue])).toEqual([
      ['b', ns, 'mine'],
      null,
      ['a', ns, 'mine'],
    ]);
  });

  it('lets a delivery token act on its one attempt (read, append, heartbeat, ack, nack) and on nothing else', async () => {
    const ns = freshNs();
    const other = freshNs();
    for (const n of [ns, other])
      for (const id of ['mine', 'theirs']) await call('POST', `/v1/ns/${n}/queues/q/invocations`, { id, envelope: b64('secret args') });
    for (const n of [ns, other]) await call('POST', `/v1/ns/${n}/queues/q/claim`, { worker_id: 'w', max: 2, lease_ms: 600_000 });
    const keys = await signingKeys(env as unknown as Record<string, string>);
    const token = await mintDeliveryToken(keys, { ns, queue: 'q', id: 'mine', attempt: 1, workerId: 'w', exp: Date.now() + 60_000 });
    const as = { authorization: `Bearer ${token}` };
    const acts = new Set([
      'GET /v1/ns/:ns/invocations/:id',
      'GET /v1/ns/:ns/invocations/:id/result',
      'GET /v1/ns/:ns/invocations/:id/journal',
      'POST /v1/ns/:ns/invocations/:id/heartbeat',
      'POST /v1/ns/:ns/invocations/:id/journal',
    ]);
    const finish = new Set(['POST /v1/ns/:ns/invocations/:id/ack', 'POST /v1/ns/:ns/invocations/:id/nack']);
    let allowed = 0;
    for (const [route, e] of Object.entries(MATRIX)) {
      const [method, template] = route.split(' ') as [string, string];
      const query = route.endsWith('/result') ? '?timeout_ms=0' : '';
      const path = (n: string, inv: string) =>
        template.replace(':ns', n).replace(':queue', 'q').replace(':name', 'nightly').replace(':worker', 'w').replace(':id', inv) + query;
      for (const [n, inv] of [
        [ns, 'mine'],
        [ns, 'theirs'],
        [other, 'mine'],
      ] as const) {
        const own = n === ns && inv === 'mine';
        if (own && finish.has(route)) continue; // below, once the rest was tried
        const r = await call(method, path(n, inv), e.body?.(inv), as);
        if (own && acts.has(route)) {
          expect(r.status, `${route} on its own attempt`).toBeLessThan(300);
          allowed++;
        } else {
          expect([401, 403, 404], `${route} on ${n === ns ? '' : "another namespace's "}${inv}: ${r.status}`).toContain(r.status);
          if (!own) expect(JSON.stringify(r.body)).not.toContain(b64('secret args'));
        }
      }
    }
    expect(allowed).toBe(5);
    // A wait on many jobs of its queue, even its own alone, is not a delivery token's to make: 403, saying why.
    const many = await call('POST', `/v1/ns/${ns}/queues/q/results`, { ids: ['mine'], timeout_ms: 0 }, as);
    expect(many.status).toBe(403);
    expect(many.body.error.message).toMatch(/acts on its one invocation only/);
    // Another attempt or holder named in the body: refused; its own: acked.
    const ack = `/v1/ns/${ns}/invocations/mine/ack`;
    expect((await call('POST', ack, { worker_id: 'w', attempt: 2 }, as)).status).toBe(403);
    expect((await call('POST', ack, { worker_id: 'someone' }, as)).status).toBe(403);
    expect((await call('GET', `/v1/ns/${ns}/invocations/mine`)).body.state).toBe('running');
    expect((await call('POST', ack, {}, as)).status).toBe(200);
    expect((await call('GET', `/v1/ns/${ns}/invocations/mine`)).body.state).toBe('succeeded');
    // Tampered, expired, or signed with a key the plane does not hold: 401.
    const tampered = `${token.slice(0, -3)}${token.at(-3) === 'A' ? 'B' : 'A'}${token.slice(-2)}`;
    const expired = await mintDeliveryToken(keys, { ns, queue: 'q', id: 'theirs', attempt: 1, workerId: 'w', exp: Date.now() - 1 });
    const foreignKey = await mintDeliveryToken(await signingKeys({ STREAM_TOKEN_KEYS: 'k'.repeat(40) }), {
      ns,
      queue: 'q',
      id: 'theirs',
      attempt: 1,
      workerId: 'w',
      exp: Date.now() + 60_000,
    });
    for (const t of [tampered, expired, foreignKey])
      expect((await call('POST', `/v1/ns/${ns}/invocations/theirs/heartbeat`, {}, { authorization: `Bearer ${t}` })).status).toBe(401);
    expect((await call('GET', `/v1/ns/${ns}/invocations/theirs`)).body.state).toBe('running');
  });

  it('lets a stream token read its one invocation (row, result, journal) and nothing else, in the header or the query', async () => {
    const ns = freshNs();
    const other = freshNs();
    for (const n of [ns, other])
      for (const id of ['mine', 'theirs']) await call('POST', `/v1/ns/${n}/queues/q/invocations`, { id, envelope: b64('secret args') });
    const minted = (await call('POST', `/v1/ns/${ns}/invocations/mine/stream-token`, {})).body as { token: string; url: string };
    expect(minted.url).toBe(`http://plane/v1/ns/${ns}/invocations/mine/journal?access_token=${minted.token}`);
    const reads = new Set([
      'GET /v1/ns/:ns/invocations/:id',
      'GET /v1/ns/:ns/invocations/:id/result',
      'GET /v1/ns/:ns/invocations/:id/journal',
    ]);
    let allowed = 0;
    for (const [route, e] of Object.entries(MATRIX)) {
      const [method, template] = route.split(' ') as [string, string];
      const query = route.endsWith('/result') ? '?timeout_ms=0' : '';
      const path = (n: string, inv: string) =>
        template.replace(':ns', n).replace(':queue', 'q').replace(':name', 'nightly').replace(':worker', 'w').replace(':id', inv) + query;
      for (const [n, inv] of [
        [ns, 'mine'],
        [ns, 'theirs'],
        [other, 'mine'],
      ] as const) {
        const own = n === ns && inv === 'mine';
        const byHeader = await call(method, path(n, inv), e.body?.(inv), { authorization: `Bearer ${minted.token}` });
        const byQuery = await call(method, `${path(n, inv)}${query ? '&' : '?'}access_token=${minted.token}`, e.body?.(inv), {
          authorization: '',
        });
        for (const r of [byHeader, byQuery]) {
          if (own && reads.has(route)) {
            expect(r.status, `${route} on its own invocation`).toBe(200);
            allowed++;
          } else {
            expect([401, 403, 404], `${route} on ${n === ns ? '' : "another namespace's "}${inv}: ${r.status}`).toContain(r.status);
            // Nothing of another invocation leaks: not its id, not its arguments.
            if (!own) expect(JSON.stringify(r.body)).not.toContain(b64('secret args'));
          }
        }
      }
    }
    expect(allowed).toBe(6);
    // Its row comes without the envelope (the arguments); a producer's has it.
    const row = await call('GET', `/v1/ns/${ns}/invocations/mine?access_token=${minted.token}`, undefined, { authorization: '' });
    expect(row.body.state).toBe('queued');
    expect(row.body).not.toHaveProperty('envelope');
    expect((await call('GET', `/v1/ns/${ns}/invocations/mine`)).body.envelope).toBe(b64('secret args'));
  }, 60_000);

  it('never takes a full token from the query string, and refuses tampered, expired and foreign-key stream tokens', async () => {
    const ns = freshNs();
    await call('POST', `/v1/ns/${ns}/queues/q/invocations`, { id: 'j', envelope: b64('x') });
    const producer = await mint(ns, 'producer');
    const path = `/v1/ns/${ns}/invocations/j/journal`;
    for (const t of [producer.token, 'test-token', 'lsk_x']) {
      const r = await call('GET', `${path}?access_token=${encodeURIComponent(t)}`, undefined, { authorization: '' });
      expect(r.status, t).toBe(401);
      expect(r.body.error.message).toContain('query string');
    }
    // Even beside a valid header: a full token in a URL is refused, not ignored.
    expect(
      (await call('GET', `${path}?access_token=${producer.token}`, undefined, { authorization: `Bearer ${producer.token}` })).status,
    ).toBe(401);
    const { token } = (await call('POST', `/v1/ns/${ns}/invocations/j/stream-token`, { ttl_ms: 1000 })).body as { token: string };
    const [claims, sig] = token.slice(4).split('.') as [string, string];
    const flip = (s: string, at: number) => `${s.slice(0, at)}${s[at] === 'A' ? 'B' : 'A'}${s.slice(at + 1)}`;
    const tamperedSig = `lss_${claims}.${flip(sig, 10)}`;
    // The last character has 2 spare bits: the same signature spelled with one of them set is refused.
    const ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
    const respelled = `lss_${claims}.${sig.slice(0, -1)}${ALPHABET[ALPHABET.indexOf(sig.at(-1)!) ^ 1]}`;
    // The claims rewritten (a later expiry, another invocation) with the old signature.
    const forged = JSON.parse(atob(claims.replace(/-/g, '+').replace(/_/g, '/')));
    const reclaim = (o: object) => `lss_${btoa(JSON.stringify(o)).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '')}.${sig}`;
    for (const [what, t] of [
      ['tampered signature', tamperedSig],
      ['respelled signature', respelled],
      ['later expiry', reclaim({ ...forged, exp: forged.exp + 3600_000 })],
      ['another id', reclaim({ ...forged, id: 'k' })],
    ] as const) {
      const r = await call('GET', `${path}?access_token=${t}`, undefined, { authorization: '' });
      expect(r.status, what).toBe(401);
      expect(r.body.error.message, what).toContain('signature');
    }
    // Once its TTL (1 s here) has passed, the same token is refused, saying so.
    const ok = await call('GET', `${path}?access_token=${token}`, undefined, { authorization: '' });
    expect(ok.status).toBe(200);
    const expired = await eventually(
      async () => {
        const r = await call('GET', `${path}?access_token=${token}`, undefined, { authorization: '' });
        return r.status === 401 ? r : undefined;
      },
      'the stream token to expire',
      5000,
    );
    expect(expired.body.error.message).toContain('expired');
    const bad = await call('POST', `/v1/ns/${ns}/invocations/j/stream-token`, { ttl_ms: 25 * 3600_000 });
    expect(bad.status).toBe(400);
    expect(bad.body.error.message).toContain('24 hours');
    expect((await call('POST', `/v1/ns/${ns}/invocations/nope/stream-token`, {})).status).toBe(404);
  });

  it("serves the dashboard's shell without a token, and nothing of any namespace in it", async () => {
    const ns = freshNs();
    await call('POST', `/v1/ns/${ns}/queues/secretqueue/invocations`, { id: 'secret-job', envelope: b64('x') });
    for (const path of ['/', '/dashboard.js']) {
      const r = await call('GET', path, undefined, { authorization: '' });
      expect(r.status, path).toBe(200);
      expect(r.headers.get('content-security-policy'), path).toContain("default-src 'self'");
      expect(String(r.body), path).not.toContain('secretqueue');
      expect(String(r.body), path).not.toContain('secret-job');
    }
  });

  it('never takes server-owned fields from a body', async () => {
    const ns = freshNs();
    for (const field of ['state', 'attempt', 'worker_id', 'namespace', 'ns', 'lease_until', 'result']) {
      const r = await call('POST', `/v1/ns/${ns}/queues/q/invocations`, {
        id: `x-${field}`,
        envelope: b64('x'),
        [field]: field === 'attempt' ? 7 : 'succeeded',
      });
      expect(r.status, field).toBe(400);
      expect(r.body.error.message).toContain(field);
    }
    const claim = await call('POST', `/v1/ns/${ns}/queues/q/claim`, { worker_id: 'w', state: 'succeeded' });
    expect(claim.status).toBe(400);
    expect((await call('GET', `/v1/ns/${ns}/queues/q/count`)).body.count).toBe(0);
  });
});
