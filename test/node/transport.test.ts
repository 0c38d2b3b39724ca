/**
 * The client's transport on both of its requesters (client/http/requester.ts): node:http, the
 * default in Node, and fetch, what a browser uses and what a caller's own `fetch` selects. A small
 * HTTP server on loopback plays the plane's answers that the real plane gives only under faults:
 * a streamed answer with its tail held open, an answer cut mid-body, a refusal with Retry-After,
 * no answer at all. (The conformance and fault suites run the real plane through the default one.)
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Transport } from '../../client/http/transport.ts';
import { NotFoundError, RateLimitedError, TimeoutError, UnavailableError } from '../../client/errors.ts';
import { until } from '../support/wait.ts';

type Handler = (req: IncomingMessage, res: ServerResponse, body: string) => void;

let server: Server;
let base = '';
let handler: Handler = (_req, res) => res.end('{}');
const seen = {
  connections: 0,
  requests: [] as { method: string; url: string; headers: IncomingMessage['headers']; body: string }[],
  finished: 0,
};

beforeAll(async () => {
  server = createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (d) => (body += d));
    req.on('end', () => {
      seen.requests.push({ method: req.method!, url: req.url!, headers: req.headers, body });
      res.on('finish', () => seen.finished++);
      handler(req, res, body);
    });
  });
  server.on('connection', () => seen.connections++);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1/ns/t`;
});
afterAll(async () => {
  server.closeAllConnections();
  await new Promise((r) => server.close(r));
});

const fresh = (h: Handler) => {
  handler = h;
  seen.connections = 0;
  seen.requests = [];
  seen.finished = 0;
};
const json = (res: ServerResponse, status: number, v: unknown, headers: Record<string, string> = {}) => {
  res.writeHead(status, { 'content-type': 'application/json', ...headers });
  res.end(JSON.stringify(v));
};

const requesters = [
  ['node:http (the default in Node)', (opts = {}) => new Transport(base, { token: 'tok', timeout: 5_000, retryForMs: 0, ...opts })],
  [
    'fetch (given by the caller)',
    (opts = {}) => new Transport(base, { token: 'tok', timeout: 5_000, retryForMs: 0, fetch: (u, i) => fetch(u, i), ...opts }),
  ],
] as const;

describe.each(requesters)('transport over %s', (name, make) => {
  const nodeHttp = name.startsWith('node');

  it('sends the token and JSON body, answers the JSON; calls one after another share one connection', async () => {
    fresh((_req, res, body) => json(res, 200, { got: body ? JSON.parse(body) : null, n: seen.requests.length }));
    const t = make();
    for (let i = 1; i <= 20; i++) expect(await t.call('POST', '/queues/q/submit', { i })).toEqual({ got: { i }, n: i });
    expect(await t.call('GET', '/queues/q')).toMatchObject({ n: 21 });
    const [first] = seen.requests;
    expect(first).toMatchObject({ method: 'POST', url: '/v1/ns/t/queues/q/submit', body: '{"i":1}' });
    expect(first!.headers).toMatchObject({ authorization: 'Bearer tok', 'content-type': 'application/json' });
    expect(seen.requests[20]!.headers['content-type']).toBeUndefined();
    // Which requester ran: node:http says who it is; fetch sends its own User-Agent.
    expect(String(first!.headers['user-agent']).startsWith('lakeshore-client/')).toBe(nodeHttp);
    // node:http's keep-alive pool is the transport's own; fetch's is the runtime's, shared by every test.
    if (nodeHttp) expect(seen.connections).toBe(1);
    t.close();
  });

  it('a streamed answer is used once its line is in; its tail is read to the end and the connection reused', async () => {
    let endTail = () => {};
    fresh((req, res) => {
      if (req.url!.endsWith('/claim')) {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.write(' ');
        res.write('{"claimed":[1,2]}\n');
        endTail = () => res.end(' ');
      } else json(res, 200, { ok: true });
    });
    const t = make();
    expect(await t.call('POST', '/queues/q/claim', { max: 2 }, { waitMs: 1_000 })).toEqual({ claimed: [1, 2] });
    expect(seen.finished).toBe(0); // answered with the tail still open
    endTail();
    await until(() => seen.finished === 1, 'the tail read to its end', 5_000);
    expect(await t.call('GET', '/health')).toEqual({ ok: true });
    if (nodeHttp) expect(seen.connections).toBe(1);
    t.close();
  });

  it('a streamed refusal of a claim that waited (its queue fenced by a move) is retried; another is thrown', async () => {
    let claims = 0;
    fresh((req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.write(' ');
      if (req.url!.endsWith('/gone')) res.end('{"error":{"code":"not_found","message":"no queue gone"}}\n  ');
      else if (++claims === 1) res.end('{"error":{"code":"unavailable","message":"namespace t is moving to another shard"}}\n  ');
      else res.end('{"claimed":[3]}\n  ');
    });
    const t = make({ retryForMs: 5_000 });
    expect(await t.call('POST', '/queues/q/claim', { max: 1 }, { waitMs: 1_000 })).toEqual({ claimed: [3] });
    expect(claims).toBe(2);
    await expect(t.call('POST', '/queues/gone', {}, { waitMs: 1_000 })).rejects.toThrow(new NotFoundError('no queue gone'));
    t.close();
  });

  it("turns the plane's error answer into its error class, with Retry-After", async () => {
    fresh((req, res) => {
      if (req.url!.includes('busy')) json(res, 429, { error: { code: 'rate_limited', message: 'slow down' } }, { 'retry-after': '2' });
      else json(res, 404, { error: { code: 'not_found', message: 'no invocation x' } });
    });
    const t = make();
    const busy = await t.call('POST', '/busy', {}).catch((e: unknown) => e);
    expect(busy).toBeInstanceOf(RateLimitedError);
    expect(busy).toMatchObject({ message: 'slow down', retryAfterMs: 2_000 });
    await expect(t.call('GET', '/invocations/x')).rejects.toThrow(new NotFoundError('no invocation x'));
    t.close();
  });

  it('an answer cut short is retried on a new connection (every verb is safe to repeat)', async () => {
    fresh((req, res) => {
      if (seen.requests.length === 1) {
        res.writeHead(200, { 'content-type': 'application/json', 'content-length': '100' });
        res.write('{"claimed":[');
        setImmediate(() => req.socket.destroy());
      } else json(res, 200, { claimed: [] });
    });
    const t = make({ retryForMs: 5_000 });
    expect(await t.call('POST', '/queues/q/claim', {})).toEqual({ claimed: [] });
    expect(seen.requests).toHaveLength(2);
    if (nodeHttp) expect(seen.connections).toBe(2);
    t.close();
  });

  it('a plane that is not there: UnavailableError naming why, after retrying for retryForMs', async () => {
    const gone = createServer();
    await new Promise<void>((r) => gone.listen(0, '127.0.0.1', r));
    const port = (gone.address() as AddressInfo).port;
    await new Promise((r) => gone.close(r));
    const told: string[] = [];
    const t = new Transport(`http://127.0.0.1:${port}/v1/ns/t`, {
      timeout: 5_000,
      retryForMs: 300,
      onUnreachable: (m) => told.push(m),
      ...(nodeHttp ? {} : { fetch: (u, i) => fetch(u, i) }),
    });
    const e = await t.call('GET', '/queues').catch((x: unknown) => x);
    expect(e).toBeInstanceOf(UnavailableError);
    expect((e as Error).message).toContain('ECONNREFUSED');
    expect(told).toHaveLength(1);
  });

  it('no answer within the timeout: TimeoutError; an abort: its reason, and the request is gone', async () => {
    const held: ServerResponse[] = [];
    fresh((_req, res) => held.push(res));
    const t = make({ timeout: 150 });
    await expect(t.call('POST', '/queues/q/submit', {})).rejects.toBeInstanceOf(TimeoutError);
    const ac = new AbortController();
    const why = new Error('stopped by the caller');
    const call = t.call('POST', '/queues/q/claim', {}, { waitMs: 10_000, signal: ac.signal });
    await until(() => held.length === 2, 'the claim reached the server', 5_000);
    ac.abort(why);
    await expect(call).rejects.toBe(why);
    // The aborted requests' connections were closed, not left waiting.
    await until(() => held.every((r) => r.socket === null || r.socket.destroyed), 'the server saw both connections close', 5_000);
    t.close();
  });
});
