/** Journal routes: append (the holding worker), read as JSON or Server-Sent Events, trim. */
import { Hono } from 'hono';
import { badRequest } from '../../core/errors.ts';
import * as v from '../../core/validate.ts';
import { unwrap } from '../../durable/result.ts';
import { pageJson } from '../../durable/sse.ts';
import { openStreamLease } from '../limits.ts';
import { bytesField, numParam, readJson } from '../body.ts';
import { limitsOf, locate, nsParam, queueObject, reader, type App, type Ctx } from '../plane.ts';
import { allow } from '../auth.ts';
import { AppendBody, TrimBody } from '../../core/wire.ts';
import type { JournalPage } from '../../core/types.ts';

const idParam = (c: Ctx) => v.id(c.req.param('id'), limitsOf(c));

/** The read cursor: `Last-Event-ID` (an SSE reconnect) wins over `since`. */
function cursor(c: Ctx): number | undefined {
  const last = c.req.header('last-event-id');
  if (last !== undefined && last !== '') {
    const n = Number(last);
    if (!Number.isInteger(n) || n < -1) throw badRequest('Last-Event-ID must be an integer seq');
    return n;
  }
  return numParam(c, 'since');
}

export const journal = new Hono<App>()
  .post('/:id/journal', async (c) => {
    const ns = nsParam(c);
    const id = idParam(c);
    allow(c, ns, 'append');
    const b = await readJson(c, AppendBody);
    const queue = await locate(c, ns, id);
    allow(c, ns, 'append', queue);
    const out = await unwrap(
      queueObject(c, ns, queue).append(ns, queue, id, {
        workerId: b.worker_id, attempt: b.attempt, seq: b.seq, kind: b.kind, body: bytesField('body', b.body), meta: b.meta, final: b.final,
      }),
    );
    return c.json({ seq: out.seq, final: out.final, absorbed: out.absorbed });
  })
  .get('/:id/journal', async (c) => {
    const ns = nsParam(c);
    const id = idParam(c);
    allow(c, ns, 'read');
    const since = cursor(c);
    if (since !== undefined && (!Number.isInteger(since) || since < -1)) throw badRequest('since must be an integer >= -1');
    const wantsStream = (c.req.header('accept') ?? '').includes('text/event-stream');
    if (wantsStream) {
      const queue = await locate(c, ns, id);
      const url = new URL('https://queue/journal');
      const lease = await openStreamLease(c, c.get('principal'));
      url.search = new URLSearchParams({ ns, queue, id, since: String(since ?? -1), gate: lease.gate, lease: lease.lease }).toString();
      try {
        const res = await queueObject(c, ns, queue).fetch(url.toString(), { signal: c.req.raw.signal });
        if (!res.ok) await lease.close(); // no stream started
        return res;
      } catch (e) {
        await lease.close();
        throw e;
      }
    }
    const wait = numParam(c, 'wait_ms');
    const limit = numParam(c, 'limit');
    if (wait) {
      const queue = await locate(c, ns, id);
      const page = await unwrap<JournalPage>(queueObject(c, ns, queue).follow(ns, queue, id, since, wait));
      return c.json(pageJson(page));
    }
    return c.json(pageJson(await reader(c).read(ns, id, since, limit)));
  })
  .post('/:id/journal/trim', async (c) => {
    const ns = nsParam(c);
    const id = idParam(c);
    allow(c, ns, 'trim');
    const b = await readJson(c, TrimBody);
    const queue = await locate(c, ns, id);
    const trimmed = await unwrap(queueObject(c, ns, queue).trim(ns, queue, id, b.keep_last));
    return c.json({ trimmed });
  });
