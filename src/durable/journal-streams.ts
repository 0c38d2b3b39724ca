/**
 * Journal streams, served from the queue object: every SSE reader of an invocation is a byte
 * stream written here, and one follower per invocation (the channel's pump) waits for its frames.
 * A frame is encoded once and written to every reader at once, so a job watched by a thousand
 * readers costs the object, per frame, one ride-along read and a thousand stream writes: no call
 * per reader, and no D1 read per reader (see core/tails.ts for how catching up reads nothing).
 *
 * A reader that joins behind the channel catches up on its own (from the journal's tail in
 * memory) and then rides with the channel, its catch-up paced by what it reads (a journal of
 * large frames is read at the reader's speed). A reader that falls too far behind the channel (its
 * unread bytes pass SLOW_BYTES) is cut: its EventSource reconnects with Last-Event-ID and loses
 * nothing. A
 * reader that goes away is dropped when its stream is cancelled; the channel's follow is called
 * off when no reader is left.
 */
import { LakeshoreError } from '../core/errors.ts';
import { reachedEnd } from '../core/sql/journal-read.ts';
import type { JournalPage } from '../core/types.ts';
import { endEvent, frameEvent, KEEPALIVE, KEEPALIVE_MS, problemEvent, RETRY } from '../core/sse.ts';

/** Unread bytes past which a reader is cut (it reconnects and resumes). */
const SLOW_BYTES = 4 << 20;
const enc = new TextEncoder();

/** How the streams read the journal: `follow` waits up to `waitMs` for a page after `since`. */
export type Follow = (id: string, since: number, waitMs: number, signal?: AbortSignal) => Promise<JournalPage>;

/** Told that a reader's stream is alive (as its bytes go out) and, once, that it ended. */
export interface ReaderHooks {
  alive(): void;
  ended(): void;
}

export interface Reader {
  writer: WritableStreamDefaultWriter<Uint8Array>;
  /** The last seq written to it. */
  cursor: number;
  gone: boolean;
  hooks: ReaderHooks | undefined;
}

interface Channel {
  /** The last seq the channel has sent: its readers are all here. */
  cursor: number;
  readers: Set<Reader>;
  stop: AbortController;
}

export class JournalStreams {
  private readonly channels = new Map<string, Channel>();
  private readonly follow: Follow;

  constructor(follow: Follow) {
    this.follow = follow;
  }

  /** Readers open now (for stats). */
  get size(): number {
    let n = 0;
    for (const c of this.channels.values()) n += c.readers.size;
    return n;
  }

  /**
   * A reader's stream of the journal of `id` after `since`, starting with `first` (the page after
   * `since`, read by the caller so that a bad id fails before any stream exists).
   */
  open(id: string, since: number, first: JournalPage, hooks?: ReaderHooks): ReadableStream<Uint8Array> {
    const { readable, r } = readerStream(since, hooks, () => this.leave(id, r));
    void this.start(id, r, first);
    return readable;
  }

  /** Sends the first page, catches up to the channel, then joins it. */
  private async start(id: string, r: Reader, first: JournalPage): Promise<void> {
    try {
      send(r, RETRY);
      let page = first;
      for (;;) {
        if (r.gone) return;
        for (const f of page.frames) {
          await room(r);
          write(r, enc.encode(frameEvent(f)));
        }
        r.cursor = page.next;
        // Room for what comes next (the end, or the channel's writes), before looking at the channel:
        // nothing may come between that look and the join.
        await room(r);
        if (page.done) return end(r, endEvent(page));
        const c = this.channels.get(id);
        // At the channel's place (or ahead of it: the channel hears of the frame soon): join it.
        // With no channel, only at the journal's end: the channel writes without waiting for anyone.
        if (c ? c.cursor <= r.cursor : reachedEnd(page)) return this.join(id, r);
        page = await this.follow(id, r.cursor, 0);
        if (!page.frames.length && !page.done) return this.join(id, r);
      }
    } catch (e) {
      fail(r, e);
    }
  }

  private join(id: string, r: Reader): void {
    const c = this.channels.get(id);
    if (c) {
      c.readers.add(r);
      return;
    }
    const fresh: Channel = { cursor: r.cursor, readers: new Set([r]), stop: new AbortController() };
    this.channels.set(id, fresh);
    void this.pump(id, fresh);
  }

  /** The channel's one follower: each page it gets goes to every reader, encoded once. */
  private async pump(id: string, c: Channel): Promise<void> {
    try {
      while (c.readers.size) {
        const page = await this.follow(id, c.cursor, KEEPALIVE_MS, c.stop.signal);
        if (!c.readers.size) break;
        const events = page.frames.map((f) => ({ seq: f.seq, bytes: enc.encode(frameEvent(f)) }));
        const keepalive = !events.length && !page.done ? enc.encode(KEEPALIVE) : null;
        const ending = page.done ? enc.encode(endEvent(page)) : null;
        for (const r of c.readers) {
          r.hooks?.alive();
          for (const ev of events) if (ev.seq > r.cursor) write(r, ev.bytes);
          if (keepalive) write(r, keepalive);
          r.cursor = Math.max(r.cursor, page.next);
          if (ending) end(r, ending);
        }
        c.cursor = page.next;
        if (page.done) break;
      }
    } catch (e) {
      for (const r of c.readers) fail(r, e);
    } finally {
      if (this.channels.get(id) === c) this.channels.delete(id);
      c.stop.abort();
    }
  }

  private leave(id: string, r: Reader): void {
    r.gone = true;
    const c = this.channels.get(id);
    if (!c?.readers.delete(r) || c.readers.size) return;
    // The last reader left: call off the channel's follow.
    this.channels.delete(id);
    c.stop.abort();
  }
}

/**
 * A reader's byte stream. Writes are never awaited (one slow reader must not hold up the rest);
 * the queue's bound is SLOW_BYTES. `gone`: the reader went away (its stream was cancelled), or was cut.
 */
export function readerStream(
  cursor: number,
  hooks: ReaderHooks | undefined,
  gone: () => void,
): { readable: ReadableStream<Uint8Array>; r: Reader } {
  const { readable, writable } = new TransformStream<Uint8Array, Uint8Array>(undefined, {
    highWaterMark: SLOW_BYTES,
    size: (c) => c.byteLength,
  });
  const r: Reader = { writer: writable.getWriter(), cursor, gone: false, hooks };
  r.writer.closed.then(
    () => hooks?.ended(),
    () => {
      r.writer.ready.catch(() => {});
      hooks?.ended();
      gone();
    },
  );
  return { readable, r };
}

export function send(r: Reader, text: string): void {
  write(r, enc.encode(text));
}

export function write(r: Reader, bytes: Uint8Array): void {
  if (r.gone) return;
  // Unread bytes beyond the bound: cut the reader; it resumes with Last-Event-ID.
  if ((r.writer.desiredSize ?? 0) < 0) {
    r.gone = true;
    void r.writer.abort(new Error('reader too slow')).catch(() => {});
    return;
  }
  r.writer.write(bytes).catch(() => (r.gone = true));
}

/**
 * Waits until the reader has taken what it holds (its unread bytes under SLOW_BYTES). Catch-up
 * writes wait so, and a reader that joins behind a journal of large frames reads it at its own
 * pace; the channel (live) never waits, and cuts a slow reader instead: it must not hold up the rest.
 */
async function room(r: Reader): Promise<void> {
  if ((r.writer.desiredSize ?? 0) <= 0) await r.writer.ready;
}

export function end(r: Reader, event: string | Uint8Array): void {
  write(r, typeof event === 'string' ? enc.encode(event) : event);
  r.gone = true;
  void r.writer.close().catch(() => {});
}

/** Ends a reader's stream after a `problem` event (or, for an error with no contract code, cuts it: the reader resumes). */
function fail(r: Reader, e: unknown): void {
  if (e instanceof LakeshoreError) {
    end(r, problemEvent(e));
    return;
  }
  r.gone = true;
  void r.writer.abort(e).catch(() => {});
}
