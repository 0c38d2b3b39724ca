/**
 * The namespace-wide lifecycle feed (`GET /events` without `?queue=`): this Worker follows the
 * feed of every queue of the namespace, each served by its queue object (durable/feed-streams.ts),
 * and writes their records into one stream: each queue's records in its commit order, the queues
 * interleaved as their records arrive.
 *
 * Resuming: an event's id is the reader's position in every queue's feed, `<queue>=<id>` joined by
 * `,` (queue names hold no `=` or `,`), so a reconnect with `Last-Event-ID` resumes every queue
 * where it was; each queue's own window and `gap` rules apply, a gap carrying its `queue`. Queues
 * that start while the stream is open are looked for every RELIST_MS and joined from then on, with
 * a `gap` `{reason: "joined", queue}`: records of that queue from before may be missing.
 *
 * With `?batch=1` each queue's `records` events (feed-streams.ts) pass through whole, as they came,
 * with the namespace's id: this Worker parses one event a batch, not one a record.
 *
 * The stream holds one of its token's stream leases (gate.ts), kept here, not by the objects.
 *
 * Its calls (each queue's stream, the lists, the lease's renewals) are subrequests of this one
 * request, which Cloudflare bounds: it ends itself before its STREAM_SUBREQUESTS are spent, and its
 * reader reconnects with its Last-Event-ID (core/subrequests.ts).
 */
import { createParser } from 'eventsource-parser';
import { badRequest } from '../core/errors.ts';
import type { Framing, Kinds } from '../durable/feed-streams.ts';
import { leaseKeeper, type TokenGate } from '../durable/gate.ts';
import { openStreamLease } from './limits.ts';
import { queueObject, reader, type Ctx } from './plane.ts';
import type { Engine } from '../core/engine.ts';
import { KEEPALIVE, KEEPALIVE_MS, RETRY, SSE_HEADERS } from '../core/sse.ts';
import { streamSubrequests, SUBREQUEST_RESERVE, SubrequestBudget } from '../core/subrequests.ts';

/** How often the namespace's queues are listed again, for queues that started since. */
export const RELIST_MS = 2_000;
/** The most queues one namespace-wide stream follows (its ids grow with them); past it, name a queue. */
export const MAX_FEED_QUEUES = 200;

const enc = new TextEncoder();
const POSITION = /^[A-Za-z0-9][A-Za-z0-9._:-]*=[a-z0-9]+\.\d+$/;

/** A namespace-wide Last-Event-ID: each queue's position. */
export function positionsOf(last: string): Map<string, string> {
  const out = new Map<string, string>();
  if (!last) return out;
  if (last.length > MAX_FEED_QUEUES * 160) throw badRequest('Last-Event-ID is not one this feed gave out');
  for (const part of last.split(',')) {
    if (!POSITION.test(part)) throw badRequest('Last-Event-ID is not one this feed gave out');
    const at = part.indexOf('=');
    out.set(part.slice(0, at), part.slice(at + 1));
  }
  return out;
}

/** The namespace's feed for a reader at `positions` (positionsOf its Last-Event-ID). */
export async function namespaceFeed(
  c: Ctx,
  ns: string,
  positions: Map<string, string>,
  kinds: Kinds,
  framing: Framing = 'each',
): Promise<Response> {
  const limit = streamSubrequests((c.env as unknown as Record<string, string | undefined>).STREAM_SUBREQUESTS);
  // Its start spends two (this list, the lease) and each queue's stream one.
  const most = Math.min(MAX_FEED_QUEUES, limit - SUBREQUEST_RESERVE - 2);
  // The names up to one past what it may follow: a namespace of any size costs one bounded read.
  const names = (r: Engine) => r.queuesPage(ns, '', Math.max(1, most + 1), Math.max(1, most + 1)).then((p) => p.queues);
  const first = await names(await reader(c, ns));
  if (first.length > most)
    throw badRequest(
      `this namespace has more than ${most} queues; a namespace-wide feed follows at most ${most}` +
        `${most < MAX_FEED_QUEUES ? ` under this plane's STREAM_SUBREQUESTS (${limit})` : ''}: name one with ?queue=`,
    );
  const lease = await openStreamLease(c, c.get('principal'));
  const done = new AbortController();
  // Spent, the stream ends: its reader's at once, each queue's as its next chunk (a keepalive at
  // the latest) comes. Not by the abort, which would cut reads this request still waits on.
  let spent = false;
  let keepalive: ReturnType<typeof setInterval> | null = null;
  let relist: ReturnType<typeof setInterval> | null = null;
  // The stream ends itself: its budget spent, or its namespace grown past what it may follow.
  const endStream = () => {
    spent = true;
    keeper.close();
    clearInterval(keepalive);
    clearInterval(relist);
    void w.close().catch(() => {});
  };
  const budget = new SubrequestBudget(limit, endStream);
  const keeper = leaseKeeper(c.env.GATE as unknown as DurableObjectNamespace<TokenGate>, lease, (p) => {
    budget.take();
    c.executionCtx.waitUntil(p);
  });
  const { readable, writable } = new TransformStream<Uint8Array, Uint8Array>();
  const w = writable.getWriter();
  // The end of the stream when its reader has gone.
  const stop = () => {
    if (done.signal.aborted) return;
    done.abort();
    keeper.close();
    void w.close().catch(() => {});
  };
  budget.take(2); // what the start spent: the list of queues, the lease
  // A reader that went away fails the next write (a keepalive at the latest): everything stops.
  const write = (text: string) => {
    if (done.signal.aborted || spent) return;
    keeper.renew();
    w.write(enc.encode(text)).catch(stop);
  };
  w.closed.catch(stop);
  const id = () => [...positions].map(([q, p]) => `${q}=${p}`).join(',');

  /** Follows one queue's feed until the stream ends, reconnecting from its position. */
  const follow = async (queue: string) => {
    for (let failures = 0; !done.signal.aborted && !spent; failures++) {
      if (!budget.take()) return;
      try {
        const q = new URLSearchParams({ kinds, last: positions.get(queue) ?? '', ...(framing === 'batch' ? { batch: '1' } : {}) });
        const res = await queueObject(c, ns, queue).fetch(`https://queue/events?${q}`, { signal: done.signal });
        if (!res.ok || !res.body) throw new Error(`the feed of ${queue} answered ${res.status}`);
        const parser = createParser({
          onEvent: (ev) => {
            if (ev.event === 'gap') return write(`event: gap\ndata: ${JSON.stringify({ ...(JSON.parse(ev.data) as object), queue })}\n\n`);
            if (ev.id) positions.set(queue, ev.id);
            if (ev.event === 'position') return;
            write(`id: ${id()}\nevent: ${ev.event}\ndata: ${ev.data}\n\n`);
            failures = 0;
          },
        });
        const body = res.body.getReader();
        const dec = new TextDecoder();
        try {
          while (!spent) {
            const { done: end, value } = await body.read();
            if (end) break;
            parser.feed(dec.decode(value, { stream: true }));
          }
        } finally {
          void body.cancel().catch(() => {});
        }
      } catch {
        if (done.signal.aborted) return;
      }
      // The object's stream ended (it restarted, or was moved): back from the position, after a pause.
      await pause(Math.min(1_000, 50 * 2 ** failures), done.signal);
    }
  };

  write(RETRY);
  const following = new Set(first);
  for (const q of first) void follow(q);
  keepalive = setInterval(() => write(KEEPALIVE), KEEPALIVE_MS);
  relist = setInterval(() => {
    // The list, and the namespace's placement read again when this isolate's copy is old (directory.ts).
    if (!budget.take(2)) return;
    void reader(c, ns)
      .then(names)
      .then(
        (all) => {
          if (all.length > most) {
            // Past what one stream follows, a queue that starts would go unheard: the reader is told
            // and the stream ends; its reconnect is refused with the 400 that says why.
            write(`event: gap\ndata: ${JSON.stringify({ reason: 'too_many_queues', most })}\n\n`);
            return endStream();
          }
          for (const q of all) {
            if (following.has(q)) continue;
            following.add(q);
            write(`event: gap\ndata: ${JSON.stringify({ reason: 'joined', queue: q })}\n\n`);
            void follow(q);
          }
        },
        () => {},
      );
  }, RELIST_MS);
  done.signal.addEventListener('abort', () => {
    clearInterval(keepalive);
    clearInterval(relist);
  });
  return new Response(readable, { headers: SSE_HEADERS });
}

const pause = (ms: number, signal: AbortSignal) =>
  new Promise<void>((r) => {
    const t = setTimeout(r, ms);
    signal.addEventListener(
      'abort',
      () => {
        clearTimeout(t);
        r();
      },
      { once: true },
    );
  });
