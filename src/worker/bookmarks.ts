/**
 * The bookmark header (src/durable/bookmark.ts; docs/contract.md, "Reads and replicas"): reads a
 * request's `x-lakeshore-bookmark` (a malformed one is a 400, before anything is done), and puts
 * on its answer the newest bookmark its D1 work saw: a queue object's writes, and the Worker's
 * own reads. A streamed answer (the feed, a journal) has sent its headers already and carries none.
 */
import type { MiddlewareHandler } from 'hono';
import { BOOKMARK_HEADER, formatBookmark, newer, parseBookmark } from '../durable/bookmark.ts';
import type { App } from './plane.ts';

export const bookmarks: MiddlewareHandler<App> = async (c, next) => {
  c.set('given', parseBookmark(c.req.header(BOOKMARK_HEADER)));
  const seen: App['Variables']['seen'] = { newest: null, ports: [] };
  c.set('seen', seen);
  await next();
  let newest = seen.newest;
  for (const { shard, port } of seen.ports) if (port.bookmark) newest = newer(newest, { shard, d1: port.bookmark });
  if (!newest || (c.res.headers.get('content-type') ?? '').startsWith('text/event-stream')) return;
  try {
    c.res.headers.set(BOOKMARK_HEADER, formatBookmark(newest));
  } catch {
    /* an answer whose headers cannot change any more: it goes without one */
  }
};
