/**
 * Hostile input: thousands of generated requests across every route (malformed JSON, wrong
 * types, huge bodies, unicode and NUL in ids, NaN and negative numbers, missing or foreign
 * tokens, replayed acks, free-form values nested thousands deep or with own __proto__ keys). No answer may be a 5xx, every error has the one shape, and a refused
 * request leaves the stored rows exactly as they were. FUZZ_N requests (1,500 in CI;
 * `npm run fault` runs 10,000).
 */
import { env } from 'cloudflare:workers';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { b64, call, freshNs } from './setup/http.ts';
import { dbOf } from './setup/objects.ts';
import { mintDeliveryToken } from '../../src/core/delivery-token.ts';
import { signingKeys } from '../../src/core/signing.ts';
import { workerName } from '../../src/core/sql/workers.ts';

const N = Number((env as unknown as { FUZZ_N?: string }).FUZZ_N ?? 1500);

/** Everything of the namespace: its rows on its shard, and its tokens in the home database. */
const snapshot = async (ns: string) => {
  const tokens = await env.DB.prepare(`SELECT count(*) AS n FROM tokens WHERE ns = ?1`).bind(ns).first<{ n: number }>();
  const r = await (await dbOf(ns))
    .prepare(
      `SELECT (SELECT group_concat(id || ':' || state || ':' || attempt || ':' || coalesce(${workerName()}, '') || ':' || hex(coalesce(result, '')), '|') FROM invocations WHERE ns = ?1)
         || '#' || (SELECT count(*) FROM frames WHERE inv IN (SELECT rid FROM invocations WHERE ns = ?1))
         || '#' || (SELECT group_concat(queue || ':' || paused || ':' || coalesce(lease_ms, '') || ':' || coalesce(max_attempts, '') || ':' || coalesce(max_running, '')
                                        || ':' || coalesce(claims_per_second, '') || ':' || coalesce(backoff, '') || ':' || coalesce(dead_letter_queue, '') || ':' || coalesce(ttl_ms, '') || ':' || coalesce(retention_ms, '') || ':' || coalesce(journal_retention_ms, '')
                                        || ':' || coalesce(push_url, '') || ':' || coalesce(push_concurrency, '') || ':' || coalesce(push_batch_size, '') || ':' || coalesce(push_secret, ''), '|')
                    FROM queues WHERE ns = ?1)
         || '#' || (SELECT group_concat(name || ':' || cron || ':' || next_at, '|') FROM schedules WHERE ns = ?1) AS s`,
    )
    .bind(ns)
    .first<{ s: string | null }>();
  return `${r?.s ?? ''}#${tokens?.n ?? 0}`;
};

const weird = fc.oneof(
  fc.string(),
  fc.string({ unit: 'grapheme' }),
  fc.constantFrom('', '\u0000', 'a\u0000b', '\ud800', '💥', '../../etc', '.', '..', '%2e%2e', '%00', 'x'.repeat(300), ' ', 'inv', 'q'),
);
const num = fc.oneof(fc.integer(), fc.double(), fc.constantFrom(-1, 0, 1, 1e308, -0, 2 ** 53, 60_001)).map((v) => v);
const value = fc.oneof(
  weird,
  num,
  fc.boolean(),
  fc.constant(null),
  fc.array(fc.string(), { maxLength: 3 }),
  fc.dictionary(fc.string(), fc.string(), { maxKeys: 3 }),
);
const fields = [
  'id',
  'envelope',
  'key',
  'priority',
  'parent',
  'worker_id',
  'kind',
  'temperature',
  'lease_ms',
  'wait_ms',
  'max',
  'attempt',
  'result',
  'error',
  'retry',
  'seq',
  'body',
  'meta',
  'final',
  'keep_last',
  'items',
  'role',
  'pools',
  'state',
  'namespace',
  'delay_ms',
  'run_at',
  'ttl_ms',
  'expires_at',
  'max_attempts',
  'max_running',
  'claims_per_second',
  'retry_backoff',
  'dead_letter_queue',
  'cron',
  'timezone',
  'limit',
  'dead_letters',
  'claim_id',
  'streams',
  'worker',
  'lines',
  'level',
  'message',
  'trace_id',
  'push',
  'retention_ms',
  'journal_retention_ms',
];
/** Scheduling input a plane must refuse: negative, NaN or far-future times, bad crons and zones, caps of 0. */
const scheduling = fc.constantFrom(
  `{"id":"s1","envelope":"eA==","delay_ms":-1}`,
  `{"id":"s2","envelope":"eA==","delay_ms":1e300}`,
  `{"id":"s3","envelope":"eA==","run_at":9e15}`,
  `{"id":"s4","envelope":"eA==","delay_ms":5,"run_at":5}`,
  `{"id":"s5","envelope":"eA==","ttl_ms":0}`,
  `{"id":"s6","envelope":"eA==","max_attempts":0}`,
  `{"max_running":0}`,
  `{"journal_retention_ms":-1}`,
  `{"journal_retention_ms":"1h"}`,
  `{"max_running":-3}`,
  `{"claims_per_second":0}`,
  `{"retry_backoff":{"factor":0.5}}`,
  `{"retry_backoff":{"initial_ms":-1}}`,
  `{"retry_backoff":{"jitter":2}}`,
  `{"dead_letter_queue":"bad name"}`,
  `{"ttl_ms":-5}`,
  `{"cron":"every day","envelope":"eA=="}`,
  `{"cron":"* * * * *","timezone":"Mars/Olympus","envelope":"eA=="}`,
  `{"cron":"61 * * * *","envelope":"eA=="}`,
  `{"limit":-1}`,
  `{"state":"running"}`,
  `{"state":"queued","limit":10}`,
  `{"state":"failed","limit":0}`,
  `{"state":"failed","limit":1001}`,
  `{"worker_id":"w","error":"x","delay_ms":-5}`,
  `{"worker_id":"w","error":"x","delay_ms":"soon"}`,
  `{"worker_id":"w","claim_id":""}`,
  `{"worker_id":"w","claim_id":"a\u0000b"}`,
  `{"worker_id":"w","claim_id":7}`,
  `{"lines":[{"id":"inv","level":"loud","message":"m"}]}`,
  `{"lines":[{"id":"inv","level":"info","message":"m","trace_id":"XYZ"}]}`,
  `{"lines":[{"id":"","level":"info","message":"m"}]}`,
  `{"lines":[{"id":"inv","level":"info","message":7}]}`,
  `{"lines":"x"}`,
  `{"push":{"url":"http://127.0.0.1:9/hook"}}`,
  `{"push":{"url":"https://10.0.0.1/hook"}}`,
  `{"push":{"url":"https://[::1]/hook"}}`,
  `{"push":{"url":"ftp://example.com/x"}}`,
  `{"push":{"url":"https://example.com/x","concurrency":0}}`,
  `{"push":{"url":"https://example.com/x","timeout_ms":-1}}`,
  `{"push":{"url":"https://example.com/x","batch_size":0}}`,
  `{"push":{"url":"https://example.com/x","batch_size":101}}`,
  `{"push":{"url":"https://example.com/x","batch_size":"10"}}`,
  `{"push":{"url":"https://example.com/x","secret":"whsec_mine"}}`,
  `{"push":{"url":""}}`,
  `{"push":{"url":"service://NOPE/hook"}}`,
  `{"push":{"url":"service://PUSH_TEST_HOOKS"}}`,
  `{"push":"https://example.com/x"}`,
  `{"push":{}}`,
  `{"ids":[]}`,
  `{"ids":"inv"}`,
  `{"ids":[7]}`,
  `{"ids":["inv",""],"timeout_ms":0}`,
  `{"ids":["inv"],"timeout_ms":-1}`,
  `{"ids":["inv"],"timeout_ms":300001}`,
  `{"ids":["inv"],"timeout_ms":"soon"}`,
  `{"ids":["done","nope","inv"],"timeout_ms":0}`,
  `{"ids":["done","inv"],"timeout_ms":0,"after":"x.1"}`,
  `{"ids":["inv"],"timeout_ms":0,"after":7}`,
  `{"ids":["inv"],"timeout_ms":0,"after":""}`,
  `{"ids":["done","done","nope"]}`,
  `{"ids":[${Array.from({ length: 1001 }, (_, i) => `"i${i}"`).join(',')}],"timeout_ms":0}`,
  `{"lines":[${Array.from({ length: 101 }, () => '{"id":"inv","level":"info","message":"m"}').join(',')}]}`,
);
/** Free-form JSON values (meta, an error object), nested up to 6,000 levels, or carrying own __proto__ keys. */
const deepJson = fc
  .tuple(fc.integer({ min: 2, max: 6_000 }), fc.boolean())
  .map(([d, arr]) => (arr ? `${'['.repeat(d)}1${']'.repeat(d)}` : `${'{"a":'.repeat(d)}1${'}'.repeat(d)}`));
const freeForm = fc.oneof(
  deepJson,
  fc.constantFrom('{"__proto__":{"p":1},"k":1}', '{"message":"m","__proto__":{"x":[1]}}', '{"__proto__":null}'),
);
const withFreeForm = fc
  .tuple(
    freeForm,
    fc.constantFrom(
      (v: string) => `{"worker_id":"w","kind":0,"body":"","meta":${v}}`,
      (v: string) => `{"worker_id":"w","retry":false,"error":{"message":"m","x":${v}}}`,
      (v: string) => `{"worker_id":"w","error":${v}}`,
      (v: string) => `{"items":[{"id":"run","worker_id":"w","error":{"message":"m","x":${v}}}]}`,
      (v: string) => `{"worker_id":"w","kind":0,"body":"","meta":{"deep":${v}}}`,
    ),
  )
  .map(([v, t]) => t(v));
const body = fc.oneof(
  withFreeForm,
  scheduling,
  fc.dictionary(fc.constantFrom(...fields), value, { maxKeys: 6 }).map((o) => JSON.stringify(o)),
  fc.constantFrom(
    '{',
    '[]',
    'null',
    '"x"',
    '{"id":',
    '\u0000',
    `{"id":"a","envelope":"${'A'.repeat(5_000_000)}"}`,
    'NaN',
    '{"priority":NaN}',
  ),
  fc.json(),
  fc.record({ id: weird, envelope: fc.oneof(fc.constant(b64('x')), weird) }).map((o) => JSON.stringify(o)),
);
const routes: [string, string][] = [
  ['POST', 'queues/:q/invocations'],
  ['POST', 'queues/:q/invocations/batch'],
  ['POST', 'queues/:q/claim'],
  ['POST', 'queues/:q/claim/cancel'],
  ['POST', 'queues/:q/ack'],
  ['POST', 'queues/:q/nack'],
  ['POST', 'queues/:q/release'],
  ['GET', 'queues/:q/count?state=:s'],
  ['PUT', 'queues/:q'],
  ['GET', 'queues/:q/stats'],
  ['GET', 'queues'],
  ['GET', 'queues?queue=:q'],
  ['GET', 'queues?queue=:q&queue=:id'],
  ['GET', 'queues?after=:q&limit=:n'],
  ['GET', 'queues?queue=:q&after=:id'],
  ['GET', 'metrics?after=:q&limit=:n'],
  ['GET', 'workers?after=:id&limit=:n'],
  ['GET', 'queue-names'],
  ['GET', 'queue-names?after=:q&limit=:n'],
  ['GET', 'storage'],
  ['POST', 'move'],
  ['GET', 'move?wait_ms=:n'],
  // The deployment's routes, of no namespace (a template from the root).
  ['GET', '/v1/shards'],
  ['GET', '/v1/shards/:id/namespaces?after=:q&limit=:n'],
  ['GET', '/v1/shards/DB/namespaces?after=:q&limit=:n'],
  ['GET', 'queues/:q'],
  ['POST', 'queues/:q/pause'],
  ['POST', 'queues/:q/resume'],
  ['POST', 'queues/:q/redrive'],
  ['GET', 'queues/:q/schedules'],
  ['PUT', 'queues/:q/schedules/:id'],
  ['DELETE', 'queues/:q/schedules/:id'],
  ['POST', 'invocations/:id/retry'],
  ['DELETE', 'invocations/:id'],
  ['POST', 'queues/:q/purge'],
  ['GET', 'invocations/:id'],
  ['GET', 'invocations/:id/result?timeout_ms=:n'],
  ['POST', 'queues/:q/results'],
  ['POST', 'invocations/get'],
  ['POST', 'invocations/:id/ack'],
  ['POST', 'invocations/:id/nack'],
  ['POST', 'invocations/:id/heartbeat'],
  ['POST', 'invocations/:id/cancel'],
  ['POST', 'invocations/:id/journal'],
  ['GET', 'invocations/:id/journal?since=:n'],
  ['POST', 'invocations/:id/journal/trim'],
  ['POST', 'tokens'],
  ['GET', 'tokens'],
  ['DELETE', 'tokens/:id'],
  ['POST', 'invocations/:id/stream-token'],
  ['GET', 'queues/:q/invocations?state=:s&limit=:n'],
  ['GET', 'queues/:q/invocations?cursor=:id'],
  ['GET', 'metrics'],
  ['GET', 'workers'],
  ['POST', 'queues/:q/workers/:id/stop'],
  ['POST', 'queues/:q/workers/:id/log'],
  ['PUT', 'code/:id'],
  ['HEAD', 'code/:id'],
  ['GET', 'code/:id'],
  ['PUT', 'code/cccccccccccccccccccccccccccccccccccccccc'],
  ['GET', 'events?queue=:q'],
  ['GET', 'events?queue=:q&kinds=:id'],
  ['GET', 'events?queue=:q&batch=:id'],
  ['GET', 'events?batch=:n'],
  ['GET', 'events'],
  ['GET', 'invocations/inv'],
  ['GET', 'invocations/inv/journal?since=:n'],
];
/**
 * Who calls: the root token, none, garbage, another namespace's admin; a stream token for `inv`
 * (as a header or in the query), a tampered one, a full token or garbage in the query.
 */
const auth = fc.constantFrom(
  'root',
  'root',
  'root',
  'none',
  'garbage',
  'foreign',
  'stream',
  'delivery',
  'stream-query',
  'tampered-query',
  'full-query',
  'garbage-query',
);
/** Percent-encodes, passing lone surrogates through as raw (invalid) UTF-8 escapes. */
const enc = (s: string) => {
  try {
    return encodeURIComponent(s);
  } catch {
    return '%ED%A0%80';
  }
};

describe('hostile input', () => {
  it(`answers ${N} generated requests with no 5xx, one error shape, and no change from any refused one`, async () => {
    const ns = freshNs();
    const other = freshNs();
    const foreign = (await call('POST', `/v1/ns/${other}/tokens`, { role: 'admin' })).body.token as string;
    // Some real state to hit: queued, running and finished invocations.
    for (const id of ['inv', 'run', 'done']) await call('POST', `/v1/ns/${ns}/queues/q/invocations`, { id, envelope: b64('x') });
    await call('POST', `/v1/ns/${ns}/queues/q/claim`, { worker_id: 'w', max: 3, lease_ms: 24 * 3600_000 });
    await call('POST', `/v1/ns/${ns}/invocations/done/ack`, { worker_id: 'w' });
    const stream = (await call('POST', `/v1/ns/${ns}/invocations/inv/stream-token`, {})).body.token as string;
    const tampered = `${stream.slice(0, -10)}${stream.at(-10) === 'A' ? 'B' : 'A'}${stream.slice(-9)}`;
    // A delivery token (push delivery) for the running job's attempt, as the plane mints one.
    const delivery = await mintDeliveryToken(await signingKeys(env as unknown as Record<string, string>), {
      ns,
      queue: 'q',
      id: 'run',
      attempt: 1,
      workerId: 'w',
      exp: Date.now() + 3600_000,
    });
    // Bookmarks (docs/contract.md, "Reads and replicas"): mostly none; else malformed, another shard's, or this plane's form.
    const bookmark = fc.oneof(
      { weight: 6, arbitrary: fc.constant(null) },
      fc.constantFrom(
        'nope',
        'DB:',
        'DB_9:00000085-0000024c-00004c6d-8e61117bf38d7adb71b934ebbf891683',
        'DB:00000085-0000024c-00004c6d-8e61117bf38d7adb71b934ebbf891683',
        `DB:${'f'.repeat(300)}`,
      ),
      fc.string({ maxLength: 40 }),
    );
    const inQuery: Record<string, string> = {
      'stream-query': stream,
      'tampered-query': tampered,
      'full-query': 'test-token',
      'garbage-query': 'lss_x.y',
    };
    let n = 0;
    let refused = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom(...routes),
        weird,
        weird,
        num,
        body,
        auth,
        bookmark,
        async ([method, tpl], q, id, k, b, who, mark) => {
          let path =
            (tpl.startsWith('/') ? '' : `/v1/ns/${ns}/`) +
            tpl
              .replace(':q', enc(q))
              .replace(':id', enc(id))
              .replace(':s', enc(String(q)))
              .replace(':n', String(k));
          const query = inQuery[who];
          if (query !== undefined) path += `${path.includes('?') ? '&' : '?'}access_token=${encodeURIComponent(query)}`;
          const bearer =
            who === 'root'
              ? null
              : who === 'garbage'
                ? 'lsk_nope'
                : who === 'foreign'
                  ? foreign
                  : who === 'stream'
                    ? stream
                    : who === 'delivery'
                      ? delivery
                      : '';
          const headers: Record<string, string> = bearer === null ? {} : { authorization: bearer ? `Bearer ${bearer}` : '' };
          if (mark !== null) headers['x-lakeshore-bookmark'] = mark;
          // Snapshots right around the request, so a lease running out elsewhere in a long run
          // cannot pass for a change made by a refused request.
          const before = await snapshot(ns);
          const r = await call(method, path, method === 'GET' || method === 'DELETE' || method === 'HEAD' ? undefined : b, headers);
          n++;
          expect(r.status, `${method} ${path.slice(0, 120)} -> ${JSON.stringify(r.body).slice(0, 200)}`).toBeLessThan(500);
          if (r.status >= 400) {
            refused++;
            // A HEAD answer has no body (HTTP): its status is the whole answer.
            if (method !== 'HEAD') expect(Object.keys(r.body)).toEqual(['error']);
            else expect(r.body).toBe('');
            if (method === 'HEAD') return;
            expect(Object.keys(r.body.error).sort()).toEqual(['code', 'message']);
            expect(typeof r.body.error.message).toBe('string');
            const after = await snapshot(ns);
            expect(after, `a refused ${method} ${path.slice(0, 80)} changed state`).toBe(before);
          }
        },
      ),
      { numRuns: N, endOnFailure: true },
    );
    // Replayed acks of a finished job are absorbed, never a second transition.
    for (let i = 0; i < 5; i++)
      expect((await call('POST', `/v1/ns/${ns}/invocations/done/ack`, { worker_id: 'w' })).body.absorbed).toBe(true);
    expect(n).toBe(N);
    expect(refused).toBeGreaterThan(N / 2);
  }, 600_000);
});
