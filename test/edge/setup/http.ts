/** Drives the Worker's routes in-process, as a client would over HTTP. */
import { exports } from 'cloudflare:workers';
import { fromBase64, toBase64, utf8 } from '../../../src/core/bytes.ts';

export const TOKEN = 'test-token';
let counter = 0;
/** A namespace of its own per test, so tests never see each other's rows. */
export const freshNs = () => `t${Date.now().toString(36)}${(counter++).toString(36)}`;

export interface Answer {
  status: number;
  body: any;
  headers: Headers;
}

export async function call(method: string, path: string, body?: unknown, headers: Record<string, string> = {}): Promise<Answer> {
  const res = await (exports as any).default.fetch(`http://plane${path}`, {
    method,
    headers: { authorization: `Bearer ${TOKEN}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }), ...headers },
    body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
  });
  // A stream (a journal or the feed) answers its status and headers here; its body is let go.
  if ((res.headers.get('content-type') ?? '').startsWith('text/event-stream')) {
    await res.body?.cancel();
    return { status: res.status, body: '', headers: res.headers };
  }
  const text = await res.text();
  let parsed: unknown = text;
  try {
    parsed = JSON.parse(text);
  } catch {
    /* not JSON */
  }
  return { status: res.status, body: parsed, headers: res.headers };
}

export const b64 = (s: string) => toBase64(utf8(s));
export const unb64 = (s: string) => new TextDecoder().decode(fromBase64(s)!);

/** A tiny client over `call` for one namespace. */
export function plane(ns = freshNs()) {
  const base = `/v1/ns/${ns}`;
  return {
    ns,
    submit: (queue: string, id: string, extra: Record<string, unknown> = {}) =>
      call('POST', `${base}/queues/${queue}/invocations`, { id, envelope: b64(`env-${id}`), ...extra }),
    claim: (queue: string, worker: string, extra: Record<string, unknown> = {}) =>
      call('POST', `${base}/queues/${queue}/claim`, { worker_id: worker, ...extra }),
    ack: (id: string, worker: string, extra: Record<string, unknown> = {}) =>
      call('POST', `${base}/invocations/${id}/ack`, { worker_id: worker, ...extra }),
    nack: (id: string, worker: string, extra: Record<string, unknown> = {}) =>
      call('POST', `${base}/invocations/${id}/nack`, { worker_id: worker, error: 'boom', ...extra }),
    heartbeat: (id: string, worker: string, extra: Record<string, unknown> = {}) =>
      call('POST', `${base}/invocations/${id}/heartbeat`, { worker_id: worker, ...extra }),
    cancel: (id: string) => call('POST', `${base}/invocations/${id}/cancel`),
    get: (id: string) => call('GET', `${base}/invocations/${id}`),
    result: (id: string, timeoutMs = 0) => call('GET', `${base}/invocations/${id}/result?timeout_ms=${timeoutMs}`),
    count: (queue: string, state = 'queued') => call('GET', `${base}/queues/${queue}/count?state=${state}`),
    append: (id: string, worker: string, extra: Record<string, unknown> = {}) =>
      call('POST', `${base}/invocations/${id}/journal`, { worker_id: worker, kind: 0, body: b64('x'), ...extra }),
    read: (id: string, since = -1) => call('GET', `${base}/invocations/${id}/journal?since=${since}`),
    trim: (id: string, keepLast: number) => call('POST', `${base}/invocations/${id}/journal/trim`, { keep_last: keepLast }),
    configure: (queue: string, body: Record<string, unknown>) => call('PUT', `${base}/queues/${queue}`, body),
  };
}
