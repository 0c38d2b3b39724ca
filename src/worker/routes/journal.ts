/** Journal routes: append (the holding worker), read as JSON or Server-Sent Events, trim. */
import { Hono } from 'hono';
import { badRequest } from '../../core/errors.ts';
import { journalCursor } from '../../core/requests.ts';
import { raise } from '../../core/settled.ts';
import { AppendBody, TrimBody } from '../../core/wire.ts';
import { relayStream } from '../relay.ts';
import { jsonBody, numParam } from '../body.ts';
import { pageJson } from '../../core/wire-json.ts';
import { hint, idParam, locate, queueObject, reader, type App, type Ctx } from '../plane.ts';
import { allow, holderOf, may } from '../auth.ts';
import { END_ID } from '../../core/sse.ts';
import type { JournalPage } from '../../core/types.ts';

/** The read cursor: `Last-Event-ID` (an SSE reconnect) wins over `since`. */
function cursor(c: Ctx): number {
  const last = c.req.header('last-event-id');
  if (last !== undefined && last !== '') {
    const n = Number(last);
    if (!Number.isInteger(n) || n < -1) throw badRequest('Last-Event-ID must be an integer seq');
    return n;
  }
  return journalCursor(numParam(c, 'since'));
}

export const journal = new Hono<App>()
  .post('/:id/journal', may('append'), jsonBody(AppendBody), async (c) => {
    const { ns } = c.var;
    const id = idParam(c);
    const b = c.req.valid('json');
    const queue = await locate(c, ns, id);
    allow(c, ns, 'append', queue);
    const req = { ...holderOf(c, b), seq: b.seq, kind: b.kind, body: b.body, meta: b.meta, final: b.final };
    const out = await raise(queueObject(c, ns, queue).append(id, req));
    return c.json({ seq: out.seq, final: out.final, absorbed: out.absorbed });
  })
  .get('/:id/journal', may('read'), async (c) => {
    const { ns } = c.var;
    const id = idParam(c);
    // A reconnect that saw the `end` event: 204, which stops an EventSource for good.
    if (c.req.header('last-event-id') === END_ID) return c.body(null, 204);
    const since = cursor(c);
    if ((c.req.header('accept') ?? '').includes('text/event-stream')) {
      // The queue object serves the stream and keeps its lease (durable/journal-streams.ts); this
      // Worker relays the bytes. The stream counts against its token while it lives.
      return relayStream(c, ns, await locate(c, ns, id), '/journal-stream', { id, since: String(since) });
    }
    const wait = numParam(c, 'wait_ms');
    const limit = numParam(c, 'limit');
    if (wait) {
      const queue = await locate(c, ns, id);
      return c.json(pageJson(await raise<JournalPage>(queueObject(c, ns, queue).follow(id, since, wait, limit))));
    }
    return c.json(pageJson(await (await reader(c, ns)).journal.read(ns, id, since, limit, hint(c))));
  })
  .post('/:id/journal/trim', may('trim'), jsonBody(TrimBody), async (c) => {
    const { ns } = c.var;
    const id = idParam(c);
    const queue = await locate(c, ns, id);
    const trimmed = await raise(queueObject(c, ns, queue).trim(id, c.req.valid('json').keep_last));
    return c.json({ trimmed });
  });
