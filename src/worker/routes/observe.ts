/** What the plane is doing: the lifecycle feed of a queue or the namespace (SSE), workers, and the namespace's metrics (Prometheus text). */
import { Hono } from 'hono';
import { badRequest } from '../../core/errors.ts';
import { metricsText } from '../../core/metrics.ts';
import { raise } from '../../core/settled.ts';
import { mergeWorkers } from '../../core/workers.ts';
import * as v from '../../core/validate.ts';
import { may } from '../auth.ts';
import { relayStream } from '../relay.ts';
import { namespaceFeed, positionsOf } from '../ns-feed.ts';
import type { Framing, Kinds } from '../../durable/feed-streams.ts';
import { limitsOf, liveOverview, queueObject, reader, type App } from '../plane.ts';
import { storageJson } from '../../core/wire-json.ts';
import { queuesAsked } from '../queue-pages.ts';
import { numParam } from '../body.ts';
import { MAX_QUEUE_NAMES } from '../../core/limits.ts';

const KINDS = new Set(['job', 'worker']);

/** `?kinds=job,worker` (the default: both), `job` or `worker`. */
function kindsOf(param: string | undefined): Kinds {
  const asked = new Set((param ?? 'job,worker').split(','));
  for (const k of asked)
    if (!KINDS.has(k)) throw badRequest(`unknown kind ${JSON.stringify(k)}: the feed has job and worker records (kinds=job,worker)`);
  return asked.size === 2 ? 'all' : ([...asked][0] as Kinds);
}

/** `?batch=1`: the records that go out together as one `records` event (their JSON array); `0` or none: an event each. */
function framingOf(param: string | undefined): Framing {
  if (param === undefined || param === '0') return 'each';
  if (param === '1') return 'batch';
  throw badRequest(`batch must be 1 (records in batches) or 0 (an event each), not ${JSON.stringify(param.slice(0, 40))}`);
}

export const observe = new Hono<App>()
  .get('/events', may('events'), async (c) => {
    const { ns } = c.var;
    const kinds = kindsOf(c.req.query('kinds'));
    const framing = framingOf(c.req.query('batch'));
    const last = c.req.header('last-event-id') ?? '';
    const q = c.req.query('queue');
    if (q === undefined) return namespaceFeed(c, ns, positionsOf(last), kinds, framing);
    const queue = v.queue(q, limitsOf(c));
    if (last.length > 64) throw badRequest('Last-Event-ID is not one this feed gave out');
    return relayStream(c, ns, queue, '/events', { last, kinds, ...(framing === 'batch' ? { batch: '1' } : {}) });
  })
  .get('/workers', may('workers'), async (c) => {
    const { ns } = c.var;
    const { queues, next } = await queuesAsked(c, ns);
    const seen = await Promise.all(queues.map(async (queue) => ({ queue, ...(await raise(queueObject(c, ns, queue).workersSeen())) })));
    return c.json({ workers: mergeWorkers(seen), next });
  })
  .get('/storage', may('queues'), async (c) => c.json(storageJson(await (await reader(c, c.var.ns)).storageState())))
  // The names alone, a page of up to 1,000: one D1 read, no queue object asked, no backlog walked.
  .get('/queue-names', may('queues'), async (c) => {
    const { ns } = c.var;
    const limit = numParam(c, 'limit');
    const from = await reader(c, ns);
    return c.json(await from.queuesPage(ns, c.req.query('after'), limit, MAX_QUEUE_NAMES));
  })
  .get('/metrics', may('metrics'), async (c) => {
    const { ns } = c.var;
    const { queues, next } = await queuesAsked(c, ns);
    const [overview, storage] = await Promise.all([liveOverview(c, ns, queues), reader(c, ns).then((r) => r.storageState())]);
    const text = metricsText(ns, overview, storage, next);
    return c.body(text, 200, { 'content-type': 'text/plain; version=0.0.4; charset=utf-8' });
  });
