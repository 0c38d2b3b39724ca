/** Invocation-scoped routes: get (one, or many), result, ack, nack, heartbeat, cancel, retry, delete, stream-token. Routed by id to the queue's object. */
import { Hono } from 'hono';
import { invocationNotFound } from '../../core/errors.ts';
import { raise } from '../../core/settled.ts';
import { AckBody, GetManyBody, HeartbeatBody, NackBody, StreamTokenBody } from '../../core/wire.ts';
import { mintStreamToken, newJti, streamCap, streamKeys, streamTtl } from '../stream-token.ts';
import { jsonBody, numParam } from '../body.ts';
import { invocationJson, outcomeJson, summaryJson } from '../../core/wire-json.ts';
import { hint, idParam, locate, queueObject, reader, type App, type Ctx } from '../plane.ts';
import { allow, holderOf, may } from '../auth.ts';
import type { Verb } from '../../core/tokens.ts';

/** The id's queue object, once the caller may `verb` on that queue (a worker token's pools). */
async function held(c: Ctx, verb: Verb) {
  const { ns } = c.var;
  const id = idParam(c);
  const queue = await locate(c, ns, id);
  allow(c, ns, verb, queue);
  return { id, stub: queueObject(c, ns, queue) };
}

export const invocations = new Hono<App>()
  // Many rows at once, a read the Worker serves itself: for a client that holds ids and not their queues.
  .post('/get', may('get'), jsonBody(GetManyBody), async (c) => {
    const rows = await (await reader(c, c.var.ns)).getMany(c.var.ns, c.req.valid('json').ids);
    return c.json({ items: rows.map((r) => (r === null ? null : summaryJson(r))) });
  })
  .get('/:id', may('get'), async (c) => {
    const id = idParam(c);
    const inv = await (await reader(c, c.var.ns)).get(c.var.ns, id, hint(c));
    if (!inv) throw invocationNotFound(id);
    const json = invocationJson(inv);
    // A stream token sees the row without its envelope: the arguments may hold what a browser should not.
    if (c.get('principal').kind === 'stream') return c.json({ ...json, envelope: undefined });
    return c.json(json);
  })
  .post('/:id/stream-token', may('stream'), jsonBody(StreamTokenBody, undefined, {}), async (c) => {
    const { ns } = c.var;
    const id = idParam(c);
    const b = c.req.valid('json');
    const ttl = streamTtl(b.ttl_ms);
    const streams = streamCap(b.streams);
    const inv = await (await reader(c, ns)).get(ns, id, hint(c));
    if (!inv) throw invocationNotFound(id);
    const exp = Date.now() + ttl;
    const token = await mintStreamToken(await streamKeys(c.env), { ns, queue: inv.queue, id, exp, jti: newJti(), streams });
    const base = `${new URL(c.req.url).origin}/v1/ns/${encodeURIComponent(ns)}/invocations/${encodeURIComponent(id)}`;
    return c.json({ token, url: `${base}/journal?access_token=${token}`, expires_at: exp, id, queue: inv.queue, streams }, 201);
  })
  .get('/:id/result', may('result'), async (c) => {
    const { id, stub } = await held(c, 'result');
    return c.json({ id, ...outcomeJson(await raise(stub.result(id, numParam(c, 'timeout_ms')))) });
  })
  .post('/:id/ack', may('ack'), jsonBody(AckBody), async (c) => {
    const b = c.req.valid('json');
    const { id, stub } = await held(c, 'ack');
    const out = await raise(stub.ack(id, { ...holderOf(c, b), result: b.result }));
    return c.json({ ok: true, absorbed: out.absorbed });
  })
  .post('/:id/nack', may('nack'), jsonBody(NackBody), async (c) => {
    const b = c.req.valid('json');
    const { id, stub } = await held(c, 'nack');
    const out = await raise(
      stub.nack(id, {
        ...holderOf(c, b),
        error: b.error,
        retry: b.retry,
        delayMs: b.delay_ms,
        maxAttempts: b.max_attempts,
      }),
    );
    return c.json({ ok: true, state: out.state, absorbed: out.absorbed });
  })
  .post('/:id/heartbeat', may('heartbeat'), jsonBody(HeartbeatBody), async (c) => {
    const b = c.req.valid('json');
    const { id, stub } = await held(c, 'heartbeat');
    const out = await raise(stub.heartbeat(id, { ...holderOf(c, b), leaseMs: b.lease_ms }));
    return c.json({ lease_until: out.leaseUntil, cancelled: out.cancelled });
  })
  .post('/:id/cancel', may('cancel'), async (c) => {
    const { id, stub } = await held(c, 'cancel');
    return c.json({ cancelled: await raise(stub.cancel(id)) });
  })
  .post('/:id/retry', may('retry'), async (c) => {
    const { id, stub } = await held(c, 'retry');
    await raise(stub.retry(id));
    return c.json({ retried: true });
  })
  .delete('/:id', may('delete'), async (c) => {
    const { id, stub } = await held(c, 'delete');
    await raise(stub.delete(id));
    return c.json({ deleted: true });
  });
