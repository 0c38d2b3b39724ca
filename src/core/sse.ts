/**
 * A journal as Server-Sent Events: how its events are written. Each frame is one `frame` event
 * whose `id` is its seq, so a client resumes losslessly with `Last-Event-ID` (or `since`); a
 * keepalive comment goes out when a wait ends with nothing; an `end` event closes the stream
 * after a final frame or once the invocation is terminal. Errors go out as a `problem` event.
 * The streams themselves are served by the queue object (src/durable/journal-streams.ts); this
 * is the contract's text form, so it lives in src/core, below both the Worker and the object.
 */
import type { LakeshoreError } from './errors.ts';
import type { JournalFrame, JournalPage } from './types.ts';
import { endJson, frameJson } from './wire-json.ts';

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

/** The first thing a stream sends: reconnect after 1 s. */
export const RETRY = `retry: 1000\n\n`;
export const KEEPALIVE = `: keepalive\n\n`;
export const frameEvent = (f: JournalFrame) => `id: ${f.seq}\nevent: frame\ndata: ${JSON.stringify(frameJson(f))}\n\n`;
export const endEvent = (p: JournalPage) => `id: ${END_ID}\nevent: end\ndata: ${JSON.stringify(endJson(p))}\n\n`;
export const problemEvent = (e: LakeshoreError) => `event: ${PROBLEM}\ndata: ${JSON.stringify({ error: e.toJSON() })}\n\n`;

export const SSE_HEADERS = Object.freeze({
  'content-type': 'text/event-stream; charset=utf-8',
  'cache-control': 'no-cache, no-transform',
  'x-accel-buffering': 'no',
});
