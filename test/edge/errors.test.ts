/** Bad input: the right 4xx, one error shape, a message saying what is wrong, and no state changed. */
import { describe, expect, it } from 'vitest';
import { b64, call, plane } from './setup/http.ts';
import { rows } from './setup/objects.ts';

function expectError(a: { status: number; body: any }, status: number, code: string, message?: RegExp) {
  expect(a.status).toBe(status);
  expect(Object.keys(a.body)).toEqual(['error']);
  expect(Object.keys(a.body.error).sort()).toEqual(['code', 'message']);
  expect(a.body.error.code).toBe(code);
  expect(typeof a.body.error.message).toBe('string');
  if (message) expect(a.body.error.message).toMatch(message);
}

/** `{"a":{"a":...1}}`, `depth` levels deep, as raw JSON text. */
const deep = (depth: number) => `${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}`;

describe('bad input', () => {
  it('refuses each malformed request with a 400 or 413 that names the problem, changing nothing', async () => {
    const p = plane();
    await p.submit('q', 'seed');
    await p.claim('q', 'w');
    const base = `/v1/ns/${p.ns}`;
    const before = await rows(p.ns);
    const cases: [string, string, unknown, number, string, RegExp][] = [
      ['POST', `${base}/queues/q/invocations`, '{not json', 400, 'bad_request', /not valid JSON/],
      ['POST', `${base}/queues/q/invocations`, { id: '', envelope: b64('x') }, 400, 'bad_request', /id must not be empty/],
      ['POST', `${base}/queues/q/invocations`, { id: 'x' }, 400, 'bad_request', /envelope/],
      ['POST', `${base}/queues/q/invocations`, { id: 'x', envelope: '@@@' }, 400, 'bad_request', /base64/],
      ['POST', `${base}/queues/q/invocations`, { id: 'x', envelope: b64('x'), priority: 'high' }, 400, 'bad_request', /priority/],
      ['POST', `${base}/queues/q/invocations`, { id: 'x\u0000y', envelope: b64('x') }, 400, 'bad_request', /control characters/],
      ['POST', `${base}/queues/q/invocations`, { id: 'x', envelope: b64('x'), state: 'succeeded' }, 400, 'bad_request', /state/],
      ['POST', `${base}/queues/q/invocations`, { id: 'x', envelope: b64('x'.repeat((1 << 20) + 1)) }, 413, 'payload_too_large', /envelope/],
      ['POST', `${base}/queues/bad%20name/invocations`, { id: 'x', envelope: b64('x') }, 400, 'bad_request', /queue/],
      ['GET', `${base}/queues?queue=bad%20name`, undefined, 400, 'bad_request', /queue/],
      [
        'GET',
        `${base}/queues?${Array.from({ length: 101 }, (_, i) => `queue=q${i}`).join('&')}`,
        undefined,
        400,
        'bad_request',
        /at most 100 queues/,
      ],
      ['GET', `${base}/queues?queue=a&after=b`, undefined, 400, 'bad_request', /not both/],
      ['GET', `${base}/queues?limit=0`, undefined, 400, 'bad_request', /limit must be at least 1/],
      ['GET', `${base}/metrics?limit=101`, undefined, 400, 'bad_request', /limit must be at most 100/],
      ['GET', `${base}/workers?after=bad%20name`, undefined, 400, 'bad_request', /queue/],
      ['GET', `${base}/queue-names?limit=1001`, undefined, 400, 'bad_request', /limit must be at most 1000/],
      ['GET', `${base}/move?wait_ms=-1`, undefined, 400, 'bad_request', /wait_ms must not be negative/],
      ['GET', `${base}/move?wait_ms=60001`, undefined, 400, 'bad_request', /longest wait this plane allows is 60000 ms/],
      ['GET', `${base}/move`, undefined, 404, 'not_found', /has not been moved/],
      ['POST', `${base}/move`, { to: 'DB_9' }, 400, 'bad_request', /no shard "DB_9"/],
      ['POST', `${base}/queues/q/claim`, { worker_id: 'w', kind: 'random' }, 400, 'bad_request', /unknown claim kind/],
      ['POST', `${base}/queues/q/claim`, { worker_id: 'w', wait_ms: -5 }, 400, 'bad_request', /wait_ms must not be negative/],
      ['POST', `${base}/queues/q/claim`, { worker_id: 'w', temperature: -1 }, 400, 'bad_request', /temperature/],
      [
        'POST',
        `${base}/queues/q/claim`,
        { worker_id: 'w', wait_ms: 60_001 },
        400,
        'bad_request',
        /longest wait this plane allows is 60000 ms/,
      ],
      ['GET', `${base}/invocations/seed/result?timeout_ms=300001`, undefined, 400, 'bad_request', /longest wait/],
      ['POST', `${base}/queues/q/claim`, { kind: 'fifo' }, 400, 'bad_request', /worker_id/],
      // A claim carrying acks: a bad ack or bad claim arguments refuse it all; the seed's ack does not land.
      ['POST', `${base}/queues/q/claim`, { worker_id: 'w', acks: [{ id: 'seed', result: '@@@' }] }, 400, 'bad_request', /base64/],
      [
        'POST',
        `${base}/queues/q/claim`,
        { worker_id: 'w', kind: 'random', acks: [{ id: 'seed' }] },
        400,
        'bad_request',
        /unknown claim kind/,
      ],
      ['POST', `${base}/queues/q/claim`, { worker_id: 'w', acks: [{ id: 'seed', state: 'succeeded' }] }, 400, 'bad_request', /state/],
      ['GET', `${base}/queues/q/count?state=sleeping`, undefined, 400, 'bad_request', /unknown state/],
      ['GET', `${base}/invocations/seed/result?timeout_ms=-1`, undefined, 400, 'bad_request', /timeout must not be negative/],
      ['GET', `${base}/invocations/seed/result?timeout_ms=soon`, undefined, 400, 'bad_request', /timeout_ms must be a number/],
      ['POST', `${base}/invocations/seed/ack`, { worker_id: 'w', result: b64('x'), attempt: -1 }, 400, 'bad_request', /attempt/],
      ['POST', `${base}/invocations/seed/nack`, { worker_id: 'w' }, 400, 'bad_request', /error/],
      ['POST', `${base}/invocations/seed/journal`, { worker_id: 'w', kind: 9, body: b64('x') }, 400, 'bad_request', /unknown frame kind/],
      ['POST', `${base}/invocations/seed/journal`, { worker_id: 'w', kind: 0, body: b64('x'), seq: 1.5 }, 400, 'bad_request', /seq/],
      [
        'POST',
        `${base}/invocations/seed/journal`,
        { worker_id: 'w', kind: 0, body: b64('x'.repeat((256 << 10) + 1)) },
        413,
        'payload_too_large',
        /frame body/,
      ],
      ['GET', `${base}/invocations/seed/journal?since=-7`, undefined, 400, 'bad_request', /since/],
      ['POST', `${base}/invocations/seed/journal/trim`, { keep_last: -1 }, 400, 'bad_request', /keep_last/],
      ['PUT', `${base}/queues/q`, { lease_ms: 0 }, 400, 'bad_request', /lease_ms/],
      ['POST', `/v1/ns/bad%20ns/queues/q/invocations`, { id: 'x', envelope: b64('x') }, 400, 'bad_request', /namespace/],
    ];
    for (const [method, path, body, status, code, message] of cases) {
      const a = await call(method, path, body);
      try {
        expectError(a, status, code, message);
      } catch (e) {
        throw new Error(
          `${method} ${path} ${JSON.stringify(body)?.slice(0, 80)} -> ${a.status} ${JSON.stringify(a.body)}: ${(e as Error).message}`,
        );
      }
    }
    expect(await rows(p.ns)).toEqual(before);
    expect((await p.read('seed')).body.frames).toEqual([]);
  });

  it('answers unknown invocations and routes with 404 in the same shape', async () => {
    const p = plane();
    expectError(await p.get('nope'), 404, 'not_found', /invocation "nope" not found/);
    expectError(await p.ack('nope', 'w'), 404, 'not_found');
    expectError(await p.cancel('nope'), 404, 'not_found');
    expectError(await p.result('nope'), 404, 'not_found');
    expectError(await call('GET', `/v1/ns/${p.ns}/nothing-here`), 404, 'not_found', /no route/);
  });

  it('requires a valid bearer token on every route but /health', async () => {
    const p = plane();
    expect((await call('GET', '/health', undefined, { authorization: '' })).status).toBe(200);
    expectError(
      await call('GET', `/v1/ns/${p.ns}/queues/q/count`, undefined, { authorization: '' }),
      401,
      'unauthorized',
      /missing bearer token/,
    );
    expectError(
      await call('GET', `/v1/ns/${p.ns}/queues/q/count`, undefined, { authorization: 'Bearer wrong' }),
      401,
      'unauthorized',
      /invalid or revoked token/,
    );
    expectError(
      await call('POST', `/v1/ns/${p.ns}/queues/q/invocations`, { id: 'x', envelope: b64('x') }, { authorization: 'Basic abc' }),
      401,
      'unauthorized',
    );
    expect((await p.count('q')).body.count).toBe(0);
  });
  it('refuses free-form values nested past 64 levels with a 400 before anything recursive touches them; 64 is stored', async () => {
    const p = plane();
    await p.submit('q', 'deep-1');
    await p.claim('q', 'w', { lease_ms: 60_000 });
    const base = `/v1/ns/${p.ns}`;
    const before = await rows(p.ns);
    const bodies: [string, string][] = [
      [`${base}/invocations/deep-1/nack`, `{"worker_id":"w","retry":false,"error":{"message":"m","x":${deep(5000)}}}`],
      [`${base}/invocations/deep-1/journal`, `{"worker_id":"w","kind":0,"body":"","meta":${deep(5000)}}`],
      [`${base}/queues/q/nack`, `{"items":[{"id":"deep-1","worker_id":"w","error":{"message":"m","x":${deep(5000)}}}]}`],
      [`${base}/invocations/deep-1/journal`, `{"worker_id":"w","kind":0,"body":"","meta":${deep(65)}}`],
    ];
    for (const [path, body] of bodies) {
      const r = await call('POST', path, body);
      expect(r.status).toBe(400);
      expect(r.body.error).toMatchObject({
        code: 'bad_request',
        message: expect.stringMatching(/nests deeper than 64 levels|may nest at most 64/),
      });
    }
    expect(await rows(p.ns)).toEqual(before);
    expect(
      (await call('POST', `${base}/invocations/deep-1/journal`, `{"worker_id":"w","kind":0,"body":"","meta":${deep(64)}}`)).status,
    ).toBe(200);
  });
  it('a wrong ?queue= hint finds nothing on the read routes too (404), as on the write routes', async () => {
    const p = plane();
    await p.submit('q', 'a');
    const base = `/v1/ns/${p.ns}/invocations/a`;
    for (const path of [
      `${base}?queue=other`,
      `${base}/result?queue=other&timeout_ms=0`,
      `${base}/journal?queue=other`,
      `${base}/journal?queue=other&wait_ms=10`,
    ]) {
      expectError(await call('GET', path), 404, 'not_found');
    }
    expectError(await call('GET', `${base}/journal?queue=other`, undefined, { accept: 'text/event-stream' }), 404, 'not_found');
    expectError(await call('POST', `${base}/cancel?queue=other`), 404, 'not_found');
    expect((await call('GET', `${base}?queue=q`)).status).toBe(200);
    expect((await call('GET', `${base}/journal?queue=q`)).status).toBe(200);
  });
  it('refuses a batch whole for one item of the wrong JSON type, naming the item; answers semantic errors per item', async () => {
    const p = plane();
    const base = `/v1/ns/${p.ns}`;
    const items = [
      { id: 'a', envelope: b64('x') },
      { id: 'b', envelope: '@@@' },
      { id: 'c', envelope: b64('x') },
    ];
    expectError(
      await call('POST', `${base}/queues/q/invocations/batch`, { items }),
      400,
      'bad_request',
      /^items\[1\]\.envelope: must be base64$/,
    );
    // A field left out is required; one in the clients' camelCase is told its wire name.
    expectError(await call('POST', `${base}/queues/q/invocations`, { envelope: b64('x') }), 400, 'bad_request', /^id is required$/);
    expectError(
      await call('POST', `${base}/queues/q/claim`, { workerId: 'w' }),
      400,
      'bad_request',
      /^worker_id is required \(the body has workerId: the wire spells it worker_id\)$/,
    );
    expectError(
      await call('POST', `${base}/queues/q/invocations`, { id: 'j', envelope: b64('x'), delayMs: 5, fooBar: 1 }),
      400,
      'bad_request',
      /^body: no field delayMs \(the wire spells it delay_ms\), fooBar$/,
    );
    expectError(
      await call('POST', `${base}/queues/q/invocations/batch`, { items: [{ id: 'j', envelope: b64('x'), maxAttempts: 2 }] }),
      400,
      'bad_request',
      /^items\[0\]: no field maxAttempts \(the wire spells it max_attempts\)$/,
    );
    // The JSON an envelope holds, sent as itself: the answer says what goes instead.
    expectError(
      await call('POST', `${base}/queues/q/invocations`, { id: 'j', envelope: { fn: 'count' } }),
      400,
      'bad_request',
      /^envelope: must be base64: a string of the bytes, base64-encoded, not an object$/,
    );
    expectError(
      await call('POST', `${base}/queues/q/invocations/batch`, {
        items: [
          { id: 'a', envelope: b64('x') },
          { id: 7, envelope: b64('x') },
        ],
      }),
      400,
      'bad_request',
      /^items\[1\]\.id: /,
    );
    expect((await p.count('q')).body.count).toBe(0);
    const out = await call('POST', `${base}/queues/q/invocations/batch`, {
      items: [
        { id: 'a', envelope: b64('x') },
        { id: '', envelope: b64('x') },
      ],
    });
    expect(out.status).toBe(200);
    expect(out.body.results[0]).toEqual({ id: 'a', created: true });
    expect(out.body.results[1].error).toMatchObject({ code: 'bad_request', message: 'id must not be empty' });
  });
});
