/**
 * A journal read over Server-Sent Events that survives dropped connections: it reconnects from
 * the last seq it yielded (Last-Event-ID), so no frame is lost or repeated, with backoff, up to 20
 * failures in a row. Ends after the `end` event; a `problem` event is raised as its error class.
 * `timeoutMs` bounds silence, not the whole read: a stream that keeps writing frames never times out.
 */
import { errorFor, LakeshoreError, TimeoutError } from '../errors.ts';
import type { JournalFrame } from '../../src/core/types.ts';
import type { ReadOptions } from '../types.ts';
import { sseEvents } from './sse.ts';
import { errorOf } from './transport.ts';
import { frameOf, type Json } from './wire.ts';

/** `connect(cursor, signal)`: one request for the stream after `cursor`; `open` holds the live ones (close() aborts them). */
export async function* followJournal(
  id: string,
  opts: ReadOptions,
  open: Set<AbortController>,
  connect: (cursor: number, signal: AbortSignal) => Promise<Response>,
): AsyncGenerator<JournalFrame> {
  let cursor = opts.since ?? -1;
  // The timeout is of silence: each frame starts it again.
  const quiet = () => (opts.timeoutMs === undefined ? Infinity : Date.now() + opts.timeoutMs);
  let deadline = quiet();
  const late = () => new TimeoutError(`journal of ${id} wrote nothing for ${opts.timeoutMs} ms and has not ended`);
  let failures = 0;
  for (;;) {
    if (Date.now() >= deadline) throw late();
    const ac = new AbortController();
    open.add(ac);
    const onAbort = () => ac.abort();
    opts.signal?.addEventListener('abort', onAbort, { once: true });
    let timer: ReturnType<typeof setTimeout> | undefined;
    const arm = () => {
      clearTimeout(timer);
      if (deadline !== Infinity) timer = setTimeout(() => ac.abort(), deadline - Date.now());
    };
    arm();
    try {
      const res = await connect(cursor, ac.signal);
      // 204: the plane says this reader already had the end (it sends that to a reconnect after `end`).
      if (res.status === 204) return;
      if (!res.ok || !res.body) throw await errorOf(res);
      failures = 0;
      for await (const ev of sseEvents(res.body, ac.signal)) {
        if (ev.event === 'frame') {
          const frame = frameOf(JSON.parse(ev.data) as Json);
          if (frame.seq <= cursor) continue;
          cursor = frame.seq;
          deadline = quiet();
          arm();
          yield frame;
        } else if (ev.event === 'end') {
          return;
        } else if (ev.event === 'problem') {
          const e = (JSON.parse(ev.data) as { error: { code: string; message: string } }).error;
          throw errorFor(e.code, e.message);
        }
      }
      // The stream closed without an `end` event: the connection dropped. Resume from the cursor.
    } catch (e) {
      if (opts.signal?.aborted) return;
      if (e instanceof LakeshoreError) throw e;
      if (Date.now() >= deadline) throw late();
      if (++failures > 20) throw e;
      await new Promise((r) => setTimeout(r, Math.min(1000, 25 * 2 ** failures)));
    } finally {
      clearTimeout(timer);
      opts.signal?.removeEventListener('abort', onAbort);
      open.delete(ac);
      ac.abort();
    }
  }
}
