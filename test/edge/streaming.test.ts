/**
 * Streaming to browsers, in workerd: an event stream that ends (204 for a reconnect after `end`),
 * server errors as `problem` events, and CORS (CORS_ORIGINS) with preflights answered without a
 * token. Real Chromium runs the same through test/browser/.
 */
import { describe, expect, it } from 'vitest';
import { exports } from 'cloudflare:workers';
import type { EventSourceMessage } from 'eventsource-parser';
import { sseEvents } from '../../client/http/sse.ts';
import { LakeshoreError } from '../../src/core/errors.ts';
import type { JournalPage } from '../../src/core/types.ts';
import { JournalStreams } from '../../src/durable/journal-streams.ts';
import { b64, call, plane } from './setup/http.ts';
import { work } from '../support/wait.ts';

/** The events of a stream, to its end; `broken`: it ended by an error (the plane aborts a stream after a problem). */
async function events(res: Response, broken = false): Promise<EventSourceMessage[]> {
  const out: EventSourceMessage[] = [];
  try {
    for await (const ev of sseEvents(res.body!)) out.push(ev);
    expect(broken, 'the stream ended cleanly').toBe(false);
  } catch (e) {
    if (!broken) throw e;
  }
  return out;
}

const sse = (path: string, headers: Record<string, string> = {}) =>
  (exports as any).default.fetch(`http://plane${path}`, { headers: { accept: 'text/event-stream', ...headers } }) as Promise<Response>;

describe('an event stream a browser can live with', () => {
  it('gives the end event the id `end`; a reconnect with it gets 204, one that missed the end gets the rest and the end', async () => {
    const p = plane();
    await p.submit('q', 'a');
    await p.claim('q', 'w');
    for (let s = 0; s < 3; s++) await p.append('a', 'w', { seq: s, body: b64(`f${s}`) });
    await p.ack('a', 'w', { result: b64('ok') });
    const { token } = (await call('POST', `/v1/ns/${p.ns}/invocations/a/stream-token`, {})).body;
    const path = `/v1/ns/${p.ns}/invocations/a/journal?access_token=${token}`;
    const all = await events(await sse(path));
    expect(all.map((e) => `${e.event}:${e.id}`)).toEqual(['frame:0', 'frame:1', 'frame:2', 'end:end']);
    expect(JSON.parse(all.at(-1)!.data).outcome).toEqual({ state: 'succeeded', result: b64('ok') });
    // What EventSource sends after the end: 204, no body, which stops it for good.
    const after = await sse(path, { 'last-event-id': 'end' });
    expect(after.status).toBe(204);
    expect(await after.text()).toBe('');
    // A reader cut after the last frame but before the end: it still gets the end (lossless).
    const missed = await events(await sse(path, { 'last-event-id': '2' }));
    expect(missed.map((e) => `${e.event}:${e.id}`)).toEqual(['end:end']);
    const middle = await events(await sse(path, { 'last-event-id': '0' }));
    expect(middle.map((e) => `${e.event}:${e.id}`)).toEqual(['frame:1', 'frame:2', 'end:end']);
  });

  it('ends a job with no frames too: its end carries the id, so the reconnect is the 204', async () => {
    const p = plane();
    await p.submit('q', 'empty');
    await p.cancel('empty');
    const path = `/v1/ns/${p.ns}/invocations/empty/journal`;
    const first = await events(await sse(path, { authorization: 'Bearer test-token' }));
    expect(first.map((e) => `${e.event}:${e.id}`)).toEqual(['end:end']);
    expect((await sse(path, { authorization: 'Bearer test-token', 'last-event-id': first[0]!.id! })).status).toBe(204);
  });

  it('lets a late reader of a journal of large frames read it whole at its own pace, where it was cut before its first frame', async () => {
    const p = plane();
    await p.submit('q', 'big');
    await p.claim('q', 'w');
    // 40 frames of 250 KiB: 13 MB of events, three times what a reader may leave unread live.
    const body = 'x'.repeat(250 << 10);
    for (let s = 0; s < 40; s++)
      expect((await p.append('big', 'w', { seq: s, body: b64(`${s}`.padEnd(body.length, 'x')) })).status).toBe(200);
    await p.ack('big', 'w', { result: b64('ok') });
    const res = await sse(`/v1/ns/${p.ns}/invocations/big/journal`, { authorization: 'Bearer test-token' });
    const seen: string[] = [];
    for await (const ev of sseEvents(res.body!)) {
      seen.push(`${ev.event}:${ev.id}`);
      // A reader slower than the plane writes: it works on each frame.
      await work(5);
    }
    expect(seen).toEqual([...Array.from({ length: 40 }, (_, i) => `frame:${i}`), 'end:end']);
  });

  it("sends a server-side error as a `problem` event, never as `error` (EventSource's own name)", async () => {
    const page: JournalPage = { frames: [], next: -1, trimmedBefore: -1, done: false, state: 'running', outcome: null };
    // The channel's follow fails after the first page (say, the invocation was purged meanwhile).
    const streams = new JournalStreams(async () => {
      throw new LakeshoreError('not_found', 'invocation "a" not found');
    });
    const res = new Response(streams.open('a', -1, page));
    const got = await events(res, true);
    expect(got.map((e) => e.event)).toEqual(['problem']);
    expect(streams.size).toBe(0);
    expect(JSON.parse(got[0]!.data)).toEqual({ error: { code: 'not_found', message: 'invocation "a" not found' } });
  });
});

describe('CORS (CORS_ORIGINS = "http://app.test, *" in these tests)', () => {
  const preflight = (path: string, origin: string, method: string) =>
    (exports as any).default.fetch(`http://plane${path}`, {
      method: 'OPTIONS',
      headers: { origin, 'access-control-request-method': method, 'access-control-request-headers': 'authorization' },
    }) as Promise<Response>;

  it("answers a listed origin's preflight without a token, on every route, and its requests with the origin echoed", async () => {
    const p = plane();
    const r = await preflight(`/v1/ns/${p.ns}/queues/q/invocations`, 'http://app.test', 'POST');
    expect(r.status).toBe(204);
    expect(r.headers.get('access-control-allow-origin')).toBe('http://app.test');
    expect(r.headers.get('access-control-allow-headers')).toContain('Authorization');
    expect(r.headers.get('access-control-allow-methods')).toContain('POST');
    const sub = await call('POST', `/v1/ns/${p.ns}/queues/q/invocations`, { id: 'c', envelope: b64('x') }, { origin: 'http://app.test' });
    expect(sub.status).toBe(201);
    expect(sub.headers.get('access-control-allow-origin')).toBe('http://app.test');
    expect(sub.headers.get('vary')).toContain('Origin');
    // A refusal reaches the page readable: the 401 carries the headers too.
    const refused = await call('GET', `/v1/ns/${p.ns}/queues`, undefined, { origin: 'http://app.test', authorization: '' });
    expect(refused.status).toBe(401);
    expect(refused.headers.get('access-control-allow-origin')).toBe('http://app.test');
  });

  it('opens only the stream-token read routes to any origin (*), and nothing to an unlisted origin elsewhere', async () => {
    const p = plane();
    await p.submit('q', 'a');
    const { token } = (await call('POST', `/v1/ns/${p.ns}/invocations/a/stream-token`, {})).body;
    for (const path of [`/v1/ns/${p.ns}/invocations/a`, `/v1/ns/${p.ns}/invocations/a/result`, `/v1/ns/${p.ns}/invocations/a/journal`]) {
      const r = await call('GET', `${path}?timeout_ms=0&access_token=${token}`, undefined, {
        origin: 'https://anywhere.example',
        authorization: '',
      });
      expect(r.status, path).toBe(200);
      expect(r.headers.get('access-control-allow-origin'), path).toBe('*');
      expect((await preflight(path, 'https://anywhere.example', 'GET')).headers.get('access-control-allow-origin'), path).toBe('*');
    }
    // Writes and listings: no CORS header for an unlisted origin, preflight or not.
    for (const [path, method] of [
      [`/v1/ns/${p.ns}/queues/q/invocations`, 'POST'],
      [`/v1/ns/${p.ns}/queues`, 'GET'],
      [`/v1/ns/${p.ns}/invocations/a/cancel`, 'POST'],
    ] as const) {
      const pre = await preflight(path, 'https://anywhere.example', method);
      expect(pre.headers.get('access-control-allow-origin'), `${method} ${path}`).toBeNull();
      if (path.endsWith('/cancel')) continue;
      const r = await call(method, path, method === 'POST' ? { id: 'x', envelope: b64('x') } : undefined, {
        origin: 'https://anywhere.example',
      });
      expect(r.headers.get('access-control-allow-origin'), `${method} ${path}`).toBeNull();
    }
  });
});
