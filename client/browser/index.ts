/**
 * `lakeshore/browser`: a job's frames, live, in a web page. No dependencies: the browser's own
 * EventSource, on the URL a stream token gives (POST .../invocations/:id/stream-token, minted by
 * your backend, which holds the real token).
 *
 *   import { streamJob } from '@dreamlake/lakeshore/browser';
 *   const stop = streamJob(url, {
 *     onFrame: (f) => out.append(f.text()),
 *     onEnd: (end) => console.log('done:', end.state),
 *     onError: (e) => console.error(e.code, e.message),
 *   });
 *
 * The plane sends `frame` events (one per frame, its seq as the event id), one `end` event, and
 * `problem` for a server-side error (EventSource's own `error` event only says the connection
 * dropped; it reconnects by itself, resuming after the last frame it got, and nothing is lost or
 * repeated). After the end the stream closes itself; a refused connection (an expired or foreign
 * token: 401, 404, 429) ends with onError, its reason read from the plane.
 */

export const FRAME_KINDS = Object.freeze(['VALUE', 'CHUNK', 'BEGIN', 'END', 'ERROR'] as const);

export interface StreamFrame {
  seq: number;
  /** 0 VALUE, 1 CHUNK, 2 BEGIN, 3 END, 4 ERROR. */
  kind: number;
  kindName: (typeof FRAME_KINDS)[number];
  /** The body's bytes. */
  bytes: Uint8Array;
  /** The body as UTF-8 text. */
  text(): string;
  /** The body parsed as JSON (what the Node and Python workers write for a value). */
  json<T = unknown>(): T;
  meta: Record<string, unknown> | null;
  attempt: number;
  /** True for the frame that ends the stream. */
  final: boolean;
}

export interface StreamEnd {
  /** The invocation's state: succeeded, failed, cancelled, or running when a final frame ended the stream first. */
  state: string;
  /** `{state, result (base64)}`, `{state, error}`, or null while it still runs. */
  outcome: { state: string; result?: string | null; error?: { message: string; [k: string]: unknown } } | null;
  /** The highest seq a trim removed (-1: none). */
  trimmed_before: number;
}

export interface StreamError {
  /** The contract's error code (unauthorized, not_found, rate_limited...), or `unavailable`. */
  code: string;
  message: string;
}

export interface StreamHandlers {
  onFrame?(frame: StreamFrame): void;
  onEnd?(end: StreamEnd): void;
  onError?(error: StreamError): void;
}

interface EventSourceLike {
  readonly readyState: number;
  addEventListener(type: string, listener: (ev: { data?: string }) => void): void;
  close(): void;
}
type EventSourceCtor = new (url: string) => EventSourceLike;

const decoder = new TextDecoder();

function bytesOf(b64: string): Uint8Array {
  const bin = atob(b64);
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

/** A frame as the plane sends it (`{seq, kind, body: base64, meta, attempt, final}`), decoded. */
export function decodeFrame(data: string): StreamFrame {
  const f = JSON.parse(data) as {
    seq: number;
    kind: number;
    body: string;
    meta: Record<string, unknown> | null;
    attempt: number;
    final: boolean;
  };
  const bytes = bytesOf(f.body);
  return {
    seq: f.seq,
    kind: f.kind,
    kindName: FRAME_KINDS[f.kind] ?? 'VALUE',
    bytes,
    text: () => decoder.decode(bytes),
    json: <T>() => JSON.parse(decoder.decode(bytes)) as T,
    meta: f.meta,
    attempt: f.attempt,
    final: f.final,
  };
}

/**
 * Streams the job behind `url` (a stream token's `url`) to `handlers` until its end. Answers a
 * function that stops it early. Pass `EventSource` to use another implementation than the page's.
 */
export function streamJob(url: string, handlers: StreamHandlers, opts: { EventSource?: EventSourceCtor } = {}): () => void {
  const ES = opts.EventSource ?? (globalThis as unknown as { EventSource: EventSourceCtor }).EventSource;
  const es = new ES(url);
  let over = false;
  const stop = () => {
    over = true;
    es.close();
  };
  es.addEventListener('frame', (ev) => {
    if (!over) handlers.onFrame?.(decodeFrame(ev.data ?? ''));
  });
  es.addEventListener('end', (ev) => {
    if (over) return;
    stop();
    handlers.onEnd?.(JSON.parse(ev.data ?? '{}') as StreamEnd);
  });
  es.addEventListener('problem', (ev) => {
    if (over) return;
    stop();
    handlers.onError?.((JSON.parse(ev.data ?? '{}') as { error: StreamError }).error);
  });
  es.addEventListener('error', () => {
    // CONNECTING (0): the connection dropped and EventSource is resuming by itself. CLOSED (2): it
    // was refused (a status other than 200); ask the plane once why.
    if (over || es.readyState !== 2) return;
    stop();
    void fetch(url, { headers: { accept: 'application/json' } })
      .then(
        async (res) =>
          ((await res.json()) as { error?: StreamError }).error ?? {
            code: 'unavailable',
            message: `the stream was refused (HTTP ${res.status})`,
          },
      )
      .catch((e: unknown) => ({ code: 'unavailable', message: `the plane cannot be reached: ${String(e)}` }))
      .then((e) => handlers.onError?.(e));
  });
  return stop;
}
