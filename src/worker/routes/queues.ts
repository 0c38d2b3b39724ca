/** Queue-scoped routes: submit, claim, ack and nack in batches, count, settings. */
import { Hono } from 'hono';
import { raise } from '../../core/settled.ts';
import { AckManyBody, ClaimBody, NackManyBody, QueueSettingsBody, SubmitBody, SubmitManyBody } from '../../core/wire.ts';
import { jsonBody, MAX_BATCH_BODY_BYTES } from '../body.ts';
import { claimedJson, itemJson } from '../json.ts';
import { queueObject, queueParam, reader, type App } from '../plane.ts';
import { allow, may } from '../auth.ts';

const acked = (r: { absorbed: boolean }) => ({ ok: true, absorbed: r.absorbed });
const nacked = (r: { state: string; absorbed: boolean }) => ({ ok: true, state: r.state, absorbed: r.absorbed });

export const queues = new Hono<App>()
  .get('/', may('queues'), async (c) => c.json({ queues: await reader(c).queues(c.var.ns) }))
  .post('/:queue/invocations', may('submit'), jsonBody(SubmitBody), async (c) => {
    const out = await raise(queueObject(c, c.var.ns, queueParam(c)).submit(c.req.valid('json')));
    return c.json(out, out.created ? 201 : 200);
  })
  .post('/:queue/invocations/batch', may('submit'), jsonBody(SubmitManyBody, MAX_BATCH_BODY_BYTES), async (c) => {
    const out = await raise(queueObject(c, c.var.ns, queueParam(c)).submitMany(c.req.valid('json').items));
    return c.json({ results: out.map((r) => itemJson(r, (v) => v)) });
  })
  .post('/:queue/claim', may('claim'), jsonBody(ClaimBody, MAX_BATCH_BODY_BYTES), async (c) => {
    const { ns } = c.var;
    const queue = queueParam(c);
    const b = c.req.valid('json');
    const req = { workerId: b.worker_id, kind: b.kind, temperature: b.temperature, leaseMs: b.lease_ms, waitMs: b.wait_ms, max: b.max };
    if (!b.acks) return c.json({ claimed: (await raise(queueObject(c, ns, queue).claim(req))).map(claimedJson) });
    allow(c, ns, 'ack', queue);
    const acks = b.acks.map((a) => ({ id: a.id, workerId: b.worker_id, attempt: a.attempt, result: a.result }));
    const out = await raise(queueObject(c, ns, queue).ackAndClaim(acks, req));
    return c.json({ claimed: out.claimed.map(claimedJson), acks: out.acks.map((r) => itemJson(r, acked)) });
  })
  .post('/:queue/ack', may('ack'), jsonBody(AckManyBody, MAX_BATCH_BODY_BYTES), async (c) => {
    const items = c.req.valid('json').items.map((a) => ({ id: a.id, workerId: a.worker_id, attempt: a.attempt, result: a.result }));
    const out = await raise(queueObject(c, c.var.ns, queueParam(c)).ackMany(items));
    return c.json({ results: out.map((r) => itemJson(r, acked)) });
  })
  .post('/:queue/nack', may('nack'), jsonBody(NackManyBody, MAX_BATCH_BODY_BYTES), async (c) => {
    const items = c.req.valid('json').items.map((n) => ({ id: n.id, workerId: n.worker_id, attempt: n.attempt, error: n.error, retry: n.retry }));
    const out = await raise(queueObject(c, c.var.ns, queueParam(c)).nackMany(items));
    return c.json({ results: out.map((r) => itemJson(r, nacked)) });
  })
  .get('/:queue/count', may('count'), async (c) => c.json({ count: await reader(c).count(c.var.ns, queueParam(c), c.req.query('state')) }))
  .put('/:queue', may('configure'), jsonBody(QueueSettingsBody), async (c) => {
    const b = c.req.valid('json');
    await raise(queueObject(c, c.var.ns, queueParam(c)).configure({ leaseMs: b.lease_ms, maxAttempts: b.max_attempts }));
    return c.json({ ok: true });
  })
  .get('/:queue/stats', may('stats'), async (c) => c.json(await queueObject(c, c.var.ns, queueParam(c)).stats()));
