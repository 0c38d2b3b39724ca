/** Invocation-scoped routes: get, result, ack, nack, heartbeat, cancel. Routed by id to the queue's object. */
import { Hono } from 'hono';
import { notFound } from '../../core/errors.ts';
import * as v from '../../core/validate.ts';
import { unwrap } from '../../durable/result.ts';
import { outcomeJson } from '../../durable/sse.ts';
import { numParam, optBytes, readJson } from '../body.ts';
import { invocationJson } from '../json.ts';
import type { Outcome } from '../../core/types.ts';
import { limitsOf, locate, nsParam, queueObject, reader, type App, type Ctx } from '../plane.ts';
import { allow } from '../auth.ts';
import { AckBody, HeartbeatBody, NackBody } from '../../core/wire.ts';

const idParam = (c: Ctx) => v.id(c.req.param('id'), limitsOf(c));

export const invocations = new Hono<App>()
  .get('/:id', async (c) => {
    const ns = nsParam(c);
    const id = idParam(c);
    allow(c, ns, 'get');
    const inv = await reader(c).get(ns, id);
    if (!inv) throw notFound(`invocation ${JSON.stringify(id)}`);
    return c.json(invocationJson(inv));
  })
  .get('/:id/result', async (c) => {
    const ns = nsParam(c);
    const id = idParam(c);
    allow(c, ns, 'result');
    const timeout = numParam(c, 'timeout_ms');
    const queue = await locate(c, ns, id);
    const out = await unwrap<Outcome>(queueObject(c, ns, queue).result(ns, queue, id, timeout));
    return c.json({ id, ...outcomeJson(out) });
  })
  .post('/:id/ack', async (c) => {
    const ns = nsParam(c);
    const id = idParam(c);
    allow(c, ns, 'ack');
    const b = await readJson(c, AckBody);
    const queue = await locate(c, ns, id);
    allow(c, ns, 'ack', queue);
    const out = await unwrap(queueObject(c, ns, queue).ack(ns, queue, id, { workerId: b.worker_id, attempt: b.attempt, result: optBytes('result', b.result) }));
    return c.json({ ok: true, absorbed: out.absorbed });
  })
  .post('/:id/nack', async (c) => {
    const ns = nsParam(c);
    const id = idParam(c);
    allow(c, ns, 'nack');
    const b = await readJson(c, NackBody);
    const queue = await locate(c, ns, id);
    allow(c, ns, 'nack', queue);
    const out = await unwrap(queueObject(c, ns, queue).nack(ns, queue, id, { workerId: b.worker_id, attempt: b.attempt, error: b.error, retry: b.retry ?? undefined }));
    return c.json({ ok: true, state: out.state, absorbed: out.absorbed });
  })
  .post('/:id/heartbeat', async (c) => {
    const ns = nsParam(c);
    const id = idParam(c);
    allow(c, ns, 'heartbeat');
    const b = await readJson(c, HeartbeatBody);
    const queue = await locate(c, ns, id);
    allow(c, ns, 'heartbeat', queue);
    const out = await unwrap(queueObject(c, ns, queue).heartbeat(ns, queue, id, { workerId: b.worker_id, attempt: b.attempt, leaseMs: b.lease_ms }));
    return c.json({ lease_until: out.leaseUntil, cancelled: out.cancelled });
  })
  .post('/:id/cancel', async (c) => {
    const ns = nsParam(c);
    const id = idParam(c);
    allow(c, ns, 'cancel');
    const queue = await locate(c, ns, id);
    const cancelled = await unwrap(queueObject(c, ns, queue).cancel(ns, queue, id));
    return c.json({ cancelled });
  });
