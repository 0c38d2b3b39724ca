/** Queue-scoped routes: submit, claim, count, settings. */
import { Hono } from 'hono';
import * as v from '../../core/validate.ts';
import { unwrap, type RpcResult } from '../../durable/result.ts';
import { bytesField, MAX_BATCH_BODY_BYTES, optBytes, readJson } from '../body.ts';
import { claimedJson } from '../json.ts';
import { limitsOf, nsParam, queueObject, reader, type App, type Ctx } from '../plane.ts';
import { allow } from '../auth.ts';
import { AckManyBody, ClaimBody, NackManyBody, QueueSettingsBody, SubmitBody, SubmitManyBody } from '../../core/wire.ts';

const ackJson = (r: RpcResult<{ absorbed: boolean }>) => (r.ok ? { ok: true, absorbed: r.value.absorbed } : { error: { code: r.code, message: r.message } });

const queueParam = (c: Ctx) => v.queue(c.req.param('queue'), limitsOf(c));

const submitInput = (b: SubmitBody) => ({ id: b.id, envelope: bytesField('envelope', b.envelope), key: b.key, priority: b.priority, parent: b.parent });

export const queues = new Hono<App>()
  .get('/', async (c) => {
    const ns = nsParam(c);
    allow(c, ns, 'queues');
    return c.json({ queues: await reader(c).queues(ns) });
  })
  .post('/:queue/invocations', async (c) => {
    const ns = nsParam(c);
    const queue = queueParam(c);
    allow(c, ns, 'submit');
    const body = await readJson(c, SubmitBody);
    const out = await unwrap(queueObject(c, ns, queue).submit(ns, queue, submitInput(body)));
    return c.json(out, out.created ? 201 : 200);
  })
  .post('/:queue/invocations/batch', async (c) => {
    const ns = nsParam(c);
    const queue = queueParam(c);
    allow(c, ns, 'submit');
    const body = await readJson(c, SubmitManyBody, MAX_BATCH_BODY_BYTES);
    const items = body.items.map(submitInput);
    const out = await unwrap(queueObject(c, ns, queue).submitMany(ns, queue, items));
    return c.json({ results: out.map((r) => (r.ok ? r.value : { error: { code: r.code, message: r.message } })) });
  })
  .post('/:queue/claim', async (c) => {
    const ns = nsParam(c);
    const queue = queueParam(c);
    allow(c, ns, 'claim', queue);
    const b = await readJson(c, ClaimBody, MAX_BATCH_BODY_BYTES);
    const req = { workerId: b.worker_id, kind: b.kind, temperature: b.temperature, leaseMs: b.lease_ms, waitMs: b.wait_ms, max: b.max };
    if (!b.acks) return c.json({ claimed: (await unwrap(queueObject(c, ns, queue).claim(ns, queue, req))).map(claimedJson) });
    allow(c, ns, 'ack', queue);
    const acks = b.acks.map((a) => ({ id: a.id, workerId: b.worker_id, attempt: a.attempt, result: optBytes('result', a.result) }));
    const out = await unwrap(queueObject(c, ns, queue).ackAndClaim(ns, queue, acks, req));
    return c.json({ claimed: out.claimed.map(claimedJson), acks: out.acks.map(ackJson) });
  })
  .post('/:queue/ack', async (c) => {
    const ns = nsParam(c);
    const queue = queueParam(c);
    allow(c, ns, 'ack', queue);
    const body = await readJson(c, AckManyBody, MAX_BATCH_BODY_BYTES);
    const items = body.items.map((a) => ({ id: a.id, workerId: a.worker_id, attempt: a.attempt, result: optBytes('result', a.result) }));
    const out = await unwrap(queueObject(c, ns, queue).ackMany(ns, queue, items));
    return c.json({ results: out.map(ackJson) });
  })
  .post('/:queue/nack', async (c) => {
    const ns = nsParam(c);
    const queue = queueParam(c);
    allow(c, ns, 'nack', queue);
    const body = await readJson(c, NackManyBody, MAX_BATCH_BODY_BYTES);
    const items = body.items.map((n) => ({ id: n.id, workerId: n.worker_id, attempt: n.attempt, error: n.error, retry: n.retry ?? undefined }));
    const out = await unwrap(queueObject(c, ns, queue).nackMany(ns, queue, items));
    return c.json({ results: out.map((r) => (r.ok ? { ok: true, state: r.value.state, absorbed: r.value.absorbed } : { error: { code: r.code, message: r.message } })) });
  })
  .get('/:queue/count', async (c) => {
    const ns = nsParam(c);
    const queue = queueParam(c);
    allow(c, ns, 'count');
    return c.json({ count: await reader(c).count(ns, queue, c.req.query('state')) });
  })
  .put('/:queue', async (c) => {
    const ns = nsParam(c);
    const queue = queueParam(c);
    allow(c, ns, 'configure');
    const b = await readJson(c, QueueSettingsBody);
    await unwrap(queueObject(c, ns, queue).configure(ns, queue, { leaseMs: b.lease_ms, maxAttempts: b.max_attempts }));
    return c.json({ ok: true });
  })
  .get('/:queue/stats', async (c) => {
    const ns = nsParam(c);
    const queue = queueParam(c);
    allow(c, ns, 'stats');
    return c.json(await queueObject(c, ns, queue).stats());
  });
