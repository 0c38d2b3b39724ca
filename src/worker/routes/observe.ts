/** What the plane is doing: each queue's lifecycle feed (SSE), and the namespace's metrics (Prometheus text). */
import { Hono } from 'hono';
import { badRequest } from '../../core/errors.ts';
import { metricsText } from '../../core/metrics.ts';
import { raise } from '../../core/settled.ts';
import { mergeWorkers } from '../../core/workers.ts';
import * as v from '../../core/validate.ts';
import { may } from '../auth.ts';
import { relayStream } from '../relay.ts';
import { limitsOf, liveOverview, queueObject, reader, type App } from '../plane.ts';

const KINDS = new Set(['job', 'worker']);

export const observe = new Hono<App>()
  .get('/events', may('events'), async (c) => {
    const { ns } = c.var;
    const q = c.req.query('queue');
    if (!q) throw badRequest('name the queue whose feed to follow: ?queue=<name> (the feed is per queue)');
    const queue = v.queue(q, limitsOf(c));
    for (const k of (c.req.query('kinds') ?? 'job').split(',')) if (!KINDS.has(k)) throw badRequest(`unknown kind ${JSON.stringify(k)}: the feed has job and worker records`);
    const last = c.req.header('last-event-id') ?? '';
    if (last.length > 64) throw badRequest('Last-Event-ID is not one this feed gave out');
    return relayStream(c, ns, queue, '/events', { last });
  })
  .get('/workers', may('workers'), async (c) => {
    const { ns } = c.var;
    const seen = await Promise.all((await reader(c).queues(ns)).map(async (queue) => ({ queue, ...(await raise(queueObject(c, ns, queue).workersSeen())) })));
    return c.json({ workers: mergeWorkers(seen) });
  })
  .get('/metrics', may('metrics'), async (c) => {
    const { ns } = c.var;
    const text = metricsText(ns, await liveOverview(c, ns));
    return c.body(text, 200, { 'content-type': 'text/plain; version=0.0.4; charset=utf-8' });
  });
