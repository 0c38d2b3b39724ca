/**
 * The journal as Server-Sent Events. Each frame is one `frame` event whose `id` is its seq, so a
 * client resumes losslessly with `Last-Event-ID` (or `since`). The stream blocks for new frames
 * and closes with an `end` event after a final frame or once the invocation is terminal.
 */
import { toBase64 } from '../core/bytes.ts';
import type { Engine } from '../core/engine.ts';
import { LakeshoreError } from '../core/errors.ts';
import type { JournalFrame, JournalPage, Outcome } from '../core/types.ts';

const KEEPALIVE_MS = 15_000;
const enc = new TextEncoder();

export const frameJson = (f: JournalFrame) => ({
  seq: f.seq,
  kind: f.kind,
  body: toBase64(f.body),
  meta: f.meta,
  attempt: f.attempt,
  final: f.final,
});

export function outcomeJson(o: Outcome | null) {
  if (!o) return null;
  if (o.state === 'succeeded') return { state: o.state, result: o.result ? toBase64(o.result) : null };
  if (o.state === 'failed' || o.state === 'cancelled') return { state: o.state, error: o.error };
  return { state: o.state, timed_out: true };
}

export function pageJson(p: JournalPage) {
  return {
    frames: p.frames.map(frameJson),
    next: p.next,
    trimmed_before: p.trimmedBefore,
    done: p.done,
    state: p.state,
    outcome: outcomeJson(p.outcome),
  };
}

/** Told when the stream is alive (at each keepalive or batch of frames) and once when it ended. */
export interface StreamHooks {
  renew(): void;
  end(): void;
}

export async function journalStream(engine: Engine, ns: string, id: string, since: number, hooks?: StreamHooks): Promise<Response> {
  // Fail before the stream starts, so a bad id is a plain 404 rather than a broken stream.
  const first = await engine.read(ns, id, since);
  const abort = new AbortController();
  const { readable, writable } = new TransformStream<Uint8Array, Uint8Array>();
  const writer = writable.getWriter();
  const send = (s: string) => writer.write(enc.encode(s));
  // The reader going away errors the writable side: stop waiting for frames at once.
  writer.closed.catch(() => abort.abort());
  void (async () => {
    let page: JournalPage = first;
    let cursor = since;
    try {
      await send(`retry: 1000\n\n`);
      for (;;) {
        for (const f of page.frames) {
          await send(`id: ${f.seq}\nevent: frame\ndata: ${JSON.stringify(frameJson(f))}\n\n`);
          cursor = f.seq;
        }
        if (page.done) {
          await send(`event: end\ndata: ${JSON.stringify({ state: page.state, trimmed_before: page.trimmedBefore, outcome: outcomeJson(page.outcome) })}\n\n`);
          break;
        }
        page = await engine.follow(ns, id, cursor, KEEPALIVE_MS, abort.signal);
        hooks?.renew();
        // A keepalive both holds idle proxies open and finds out that the reader has gone.
        if (!page.frames.length && !page.done) await send(`: keepalive\n\n`);
      }
      await writer.close();
    } catch (e) {
      abort.abort();
      if (e instanceof LakeshoreError) {
        await send(`event: error\ndata: ${JSON.stringify({ error: e.toJSON() })}\n\n`).catch(() => {});
      }
      await writer.abort(e).catch(() => {});
    } finally {
      hooks?.end();
    }
  })();
  return new Response(readable, {
    headers: { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache, no-transform', 'x-accel-buffering': 'no' },
  });
}
