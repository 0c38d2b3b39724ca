/** Per-token limits: requests per second and open journal streams answer 429 with Retry-After, and change nothing. */
import { exports } from 'cloudflare:workers';
import { describe, expect, it } from 'vitest';
import { until } from '../support/wait.ts';
import { b64, call, freshNs } from './setup/http.ts';

const as = (token: string) => ({ authorization: `Bearer ${token}` });

async function mint(ns: string, limits: Record<string, number>) {
  const r = await call('POST', `/v1/ns/${ns}/tokens`, { role: 'admin', limits });
  expect(r.status).toBe(201);
  expect(r.body.limits).toEqual(limits);
  return r.body.token as string;
}

const openStream = (ns: string, id: string, token: string) =>
  (exports as any).default.fetch(`http://plane/v1/ns/${ns}/invocations/${id}/journal`, {
    headers: { ...as(token), accept: 'text/event-stream' },
  }) as Promise<Response>;

describe('per-token limits', () => {
  it('a token over its request rate gets 429 with Retry-After and a JSON error, and its request changes nothing', async () => {
    const ns = freshNs();
    const token = await mint(ns, { requests_per_second: 1, request_burst: 3 });
    const base = `/v1/ns/${ns}`;
    const answers = [];
    for (let i = 0; i < 4; i++)
      answers.push(await call('POST', `${base}/queues/q/invocations`, { id: `r${i}`, envelope: b64('x') }, as(token)));
    expect(answers.slice(0, 3).map((a) => a.status)).toEqual([201, 201, 201]);
    const refused = answers[3]!;
    expect(refused.status).toBe(429);
    expect(refused.body.error.code).toBe('rate_limited');
    expect(refused.body.error.message).toMatch(/1 requests per second/);
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    // The refused submit did not land (counted with the root token, which has its own budget).
    expect((await call('GET', `${base}/invocations/r3`)).status).toBe(404);
    expect((await call('GET', `${base}/queues/q/count`)).body.count).toBe(3);
    // Another token's budget is its own.
    const other = await mint(ns, { requests_per_second: 1, request_burst: 1 });
    expect((await call('GET', `${base}/queues/q/count`, undefined, as(other))).status).toBe(200);
  });

  it('refuses no request within budget when they arrive together: N <= burst concurrent all pass, burst + k get at most k refusals', async () => {
    const ns = freshNs();
    const token = await mint(ns, { requests_per_second: 100, request_burst: 200 });
    const path = `/v1/ns/${ns}/queues/q/count?state=queued`;
    const together = async (n: number) =>
      (await Promise.all(Array.from({ length: n }, () => call('GET', path, undefined, as(token))))).map((r) => r.status);
    const first = await together(150);
    expect(first.filter((s) => s !== 200)).toEqual([]);
    // 50 of the burst are left (plus what refilled meanwhile): 70 at once get at most 20 refusals, each a 429.
    const second = await together(70);
    const refused = second.filter((s) => s !== 200);
    expect(refused.every((s) => s === 429)).toBe(true);
    expect(refused.length).toBeLessThanOrEqual(20);
    // The root token, with the plane's defaults (2,000/s, burst 4,000): 300 at once all pass.
    const root = await Promise.all(Array.from({ length: 300 }, () => call('GET', `/v1/ns/${ns}/queues/q/count`)));
    expect(root.filter((r) => r.status !== 200)).toEqual([]);
  });

  it('refills at the token’s rate', async () => {
    const ns = freshNs();
    // 2/s: the one permit comes back 500 ms after it is spent. The second request must come within those
    // 500 ms to be refused; at 20/s (50 ms) a loaded machine once took longer between two requests.
    const token = await mint(ns, { requests_per_second: 2, request_burst: 1 });
    const path = `/v1/ns/${ns}/queues/q/count`;
    const before = Date.now();
    expect((await call('GET', path, undefined, as(token))).status).toBe(200);
    expect((await call('GET', path, undefined, as(token))).status).toBe(429);
    // Ask again until the permit is there (a 429 spends nothing): not before 500 ms after the first was spent.
    await until(async () => (await call('GET', path, undefined, as(token))).status === 200, 'a refilled permit', 5_000);
    expect(Date.now() - before).toBeGreaterThanOrEqual(450);
  });

  it('a token with its streams open gets 429 for one more, and a stream closed frees its place', async () => {
    const ns = freshNs();
    const token = await mint(ns, { streams: 1 });
    const base = `/v1/ns/${ns}`;
    expect((await call('POST', `${base}/queues/q/invocations`, { id: 'live', envelope: b64('x') })).status).toBe(201);
    const first = await openStream(ns, 'live', token);
    expect(first.status).toBe(200);
    const reader = first.body!.getReader();
    await reader.read(); // the stream is open and waiting for frames
    const second = await openStream(ns, 'live', token);
    expect(second.status).toBe(429);
    expect(second.headers.get('retry-after')).toBe('1');
    expect(((await second.json()) as any).error.code).toBe('rate_limited');
    await reader.cancel();
    let third: Response | null = null;
    await until(
      async () => {
        await third?.body?.cancel();
        third = await openStream(ns, 'live', token);
        return third.status === 200;
      },
      'the closed stream to free its place',
      5_000,
    );
    await third!.body!.cancel();
  });

  it("a stream token has its own stream cap (`streams` at minting), not its minter's", async () => {
    const ns = freshNs();
    const minter = await mint(ns, { streams: 1 });
    expect((await call('POST', `/v1/ns/${ns}/queues/q/invocations`, { id: 'live', envelope: b64('x') })).status).toBe(201);
    const { token } = (await call('POST', `/v1/ns/${ns}/invocations/live/stream-token`, { streams: 2 }, as(minter))).body;
    // The minter holds its one stream; the stream token still opens its own two, and no third.
    const held = await openStream(ns, 'live', minter);
    expect(held.status).toBe(200);
    const open = [await openStream(ns, 'live', token), await openStream(ns, 'live', token)];
    expect(open.map((r) => r.status)).toEqual([200, 200]);
    const third = await openStream(ns, 'live', token);
    expect(third.status).toBe(429);
    expect(((await third.json()) as any).error.message).toContain('2 journal streams');
    for (const r of [held, ...open]) await r.body!.cancel();
  });

  it('refuses limits that are not positive integers', async () => {
    const ns = freshNs();
    for (const limits of [{ requests_per_second: 0 }, { streams: -1 }, { request_burst: 1.5 }, { other: 1 }]) {
      const r = await call('POST', `/v1/ns/${ns}/tokens`, { role: 'producer', limits });
      expect(r.status).toBe(400);
      expect(r.body.error.code).toBe('bad_request');
    }
  });
});
