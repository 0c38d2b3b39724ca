/**
 * A journal as Server-Sent Events. Each frame is one `frame` event whose `id` is its seq, so a
 * client resumes losslessly with `Last-Event-ID` (or `since`). The stream asks the queue object
 * for the next page (it waits there, woken by the append), sends a keepalive comment when a wait
 * ends with nothing, and closes with an `end` event after a final frame or once the invocation is
 * terminal. Errors go out as a `problem` event.
 */
import { LakeshoreError } from '../core/errors.ts';
import type { JournalPage } from '../core/types.ts';
import { endJson, frameJson } from './json.ts';

/**
 * The `end` event's id. A browser's EventSource reconnects after any close, with the last id it
 * saw as `Last-Event-ID`; a reconnect that carries this id has seen the end and is answered 204 No
 * Content, which by the SSE spec stops EventSource for good. A reconnect that missed the end
 * carries a frame's seq and gets the rest of the frames and then the end.
 */
export const END_ID = 'end';
/**
 * The event a server-side error goes out as: not `error`, which is EventSource's own name for a
 * failed connection, so a page can tell the two apart.
 */
export const PROBLEM = 'problem';

/** How long one wait for frames lasts before a keepalive. */
export const KEEPALIVE_MS = 15_000;
const enc = new TextEncoder();

export interface JournalSource {
  /** The next page after `cursor`, waiting up to `waitMs` for one. */
  next(cursor: number, waitMs: number): Promise<JournalPage>;
  /** Calls off a `next` in progress: the reader went away. */
  abort(): void;
  /** Told that the stream is alive (each page or keepalive) and, once, that it ended. */
  alive?(): void;
  ended?(): void;
}

export function journalStream(first: JournalPage, since: number, src: JournalSource): Response {
  const { readable, writable } = new TransformStream<Uint8Array, Uint8Array>();
  const writer = writable.getWriter();
  const send = (s: string) => writer.write(enc.encode(s));
  let gone = false;
  let ended = false;
  const end = () => {
    if (!ended) src.ended?.();
    ended = true;
  };
  // The reader going away errors the writable side: stop the wait in progress, free the stream's place.
  writer.closed.catch(() => {
    gone = true;
    src.abort();
    end();
  });
  void (async () => {
    let page = first;
    let cursor = since;
    try {
      await send(`retry: 1000\n\n`);
      for (;;) {
        for (const f of page.frames) {
          await send(`id: ${f.seq}\nevent: frame\ndata: ${JSON.stringify(frameJson(f))}\n\n`);
          cursor = f.seq;
        }
        if (page.done) {
          // Its id tells a reconnect that the reader saw the end: that one gets 204 (see END_ID).
          await send(`id: ${END_ID}\nevent: end\ndata: ${JSON.stringify(endJson(page))}\n\n`);
          break;
        }
        page = await src.next(cursor, KEEPALIVE_MS);
        if (gone) break;
        src.alive?.();
        // A keepalive both holds idle proxies open and finds out that the reader has gone.
        if (!page.frames.length && !page.done) await send(`: keepalive\n\n`);
      }
      await writer.close();
    } catch (e) {
      if (e instanceof LakeshoreError) await send(`event: ${PROBLEM}\ndata: ${JSON.stringify({ error: e.toJSON() })}\n\n`).catch(() => {});
      await writer.abort(e).catch(() => {});
    } finally {
      end();
    }
  })();
  return new Response(readable, {
    headers: { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache, no-transform', 'x-accel-buffering': 'no' },
  });
}
