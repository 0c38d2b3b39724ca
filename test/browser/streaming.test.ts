/**
 * Streaming to browsers, in real Chromium (Debian's, driven by playwright-core): a page on another
 * loopback origin reads a job's frames with the browser's own EventSource, on the URL of a stream
 * token, while a worker appends them. Requests are counted (and connections cut) by a TCP proxy
 * in front of the plane.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Browser, Page } from 'playwright-core';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { encodeFrame, FrameKind, HttpDispatch } from '../../client/local/index.ts';
import { type Proxy as CuttingProxy, startProxy } from '../fault/proxy.ts';
import { launch, plane, site, type Site, type TestPlane } from './harness.ts';
import { closeReceiver, receiver, type Hit } from '../support/push-receiver.ts';
import { until } from '../support/wait.ts';

let browser: Browser;
let allowed: Site;
let other: Site;
let p: TestPlane;
let ns = 0;

const FRAMES = 500;
const shots = join(process.cwd(), 'node_modules', '.cache', 'lakeshore-screenshots');

beforeAll(async () => {
  [allowed, other] = await Promise.all([site(), site()]);
  // Only `allowed` may call the plane from a page: `other` is refused by CORS.
  p = await plane([allowed.origin]);
  browser = await launch();
}, 120_000);

afterAll(async () => {
  await browser?.close();
  await p?.stop();
  await allowed?.close();
  await other?.close();
});

/** A fresh namespace with a job `id` claimed by worker `w` (its lease long enough for the test). */
async function job(id = 'job') {
  const d = new HttpDispatch(p.plane.url, { token: p.token, namespace: `b${Date.now().toString(36)}${ns++}` });
  await d.submit('q', new TextEncoder().encode('{"secret":"args"}'), { id });
  return d;
}

async function claimAndAppend(d: HttpDispatch, id: string, n: number) {
  const [c] = await d.claimMany('q', 'w', 1, { leaseMs: 600_000 });
  expect(c!.id).toBe(id);
  for (let s = 0; s < n; s++)
    await d.journalAppend(
      id,
      s,
      encodeFrame({ kind: FrameKind.VALUE, seq: s, body: new TextEncoder().encode(`token ${s} `), meta: null }),
      { workerId: 'w' },
    );
  await d.ack(id, 'w', { result: new TextEncoder().encode('"done"') });
}

async function openPage(origin: string): Promise<Page> {
  const page = await browser.newPage();
  await page.goto(origin);
  await page.waitForFunction(() => (window as any).ready === true, undefined, { timeout: 10_000 });
  return page;
}

/** Starts streamJob in the page; its frames, end and errors collect on window.got. */
const streamInPage = (page: Page, url: string) =>
  page.evaluate((u) => {
    const w = window as any;
    w.got = { seqs: [] as number[], texts: [] as string[], end: null, errors: [] as unknown[] };
    const out = document.getElementById('out')!;
    w.stop = w.lake.streamJob(u, {
      onFrame: (f: any) => {
        w.got.seqs.push(f.seq);
        w.got.texts.push(f.text());
        out.textContent += f.text();
      },
      onEnd: (e: any) => {
        w.got.end = e;
        document.getElementById('status')!.textContent = `ended: ${e.state}`;
      },
      onError: (e: any) => {
        w.got.errors.push(e);
        document.getElementById('status')!.textContent = `error: ${e.code}: ${e.message}`;
      },
    });
  }, url);

const got = (page: Page) =>
  page.evaluate(() => (window as any).got as { seqs: number[]; texts: string[]; end: any; errors: { code: string; message: string }[] });

/** The stream URL through `proxy` (the token's URL names the plane's own origin). */
const via = (proxy: CuttingProxy, url: string) => url.replace(p.plane.url, proxy.url);

describe('a browser streams a job', () => {
  it(`receives ${FRAMES} frames in order, each once, then the end; after it, no more requests`, async () => {
    const d = await job();
    const proxy = await startProxy(p.plane.url);
    try {
      const { url } = await d.streamToken('job');
      const page = await openPage(allowed.origin);
      await streamInPage(page, via(proxy, url));
      await claimAndAppend(d, 'job', FRAMES);
      await page.waitForFunction(() => (window as any).got.end !== null, undefined, { timeout: 120_000 });
      const g = await got(page);
      expect(g.seqs).toEqual(Array.from({ length: FRAMES }, (_, i) => i));
      expect(g.texts[7]).toBe('token 7 ');
      expect(g.end.state).toBe('succeeded');
      expect(g.errors).toEqual([]);
      mkdirSync(shots, { recursive: true });
      await page.screenshot({ path: join(shots, 'stream-ended.png') });
      // streamJob closed its EventSource at the end: the one request was all.
      const journal = () => proxy.requests.filter((r) => r.includes('/journal'));
      expect(journal()).toHaveLength(1);
      await page.close();
    } finally {
      await proxy.close();
    }
  }, 180_000);

  it("runs the README's example page as printed: every value, then the end", async () => {
    const d = await job();
    const { url } = await d.streamToken('job');
    const page = await browser.newPage();
    await page.goto(`${allowed.origin}/example.html?stream=${encodeURIComponent(url)}`);
    await claimAndAppend(d, 'job', 20);
    await page.waitForFunction(() => document.getElementById('out')!.textContent!.includes('-- succeeded'), undefined, { timeout: 60_000 });
    const lines = (await page.textContent('#out'))!.trim().split('\n');
    expect(lines).toEqual([...Array.from({ length: 20 }, (_, i) => `token ${i} `), '-- succeeded']);
    await page.screenshot({ path: join(shots, 'readme-example.png') });
    await page.close();
  }, 60_000);

  it('a bare EventSource that never calls close() makes exactly one request after the end, answered 204', async () => {
    const d = await job();
    const proxy = await startProxy(p.plane.url);
    try {
      const { url } = await d.streamToken('job');
      await claimAndAppend(d, 'job', 5);
      const page = await openPage(allowed.origin);
      await page.evaluate(
        (u) => {
          const w = window as any;
          w.bare = { frames: 0, ends: 0, errors: 0 };
          w.es = new EventSource(u);
          w.es.addEventListener('frame', () => w.bare.frames++);
          w.es.addEventListener('end', () => w.bare.ends++);
          w.es.addEventListener('error', () => w.bare.errors++);
        },
        via(proxy, url),
      );
      // After the end, EventSource reconnects once (Last-Event-ID: end), gets 204, and is CLOSED for good.
      await page.waitForFunction(() => (window as any).es.readyState === 2, undefined, { timeout: 30_000 });
      const bare = await page.evaluate(() => (window as any).bare);
      // Its `error` events: the stream closing after the end (it goes to reconnect), then the 204 (it stops).
      expect(bare).toEqual({ frames: 5, ends: 1, errors: 2 });
      expect(proxy.requests.filter((r) => r.includes('/journal'))).toHaveLength(2);
      expect(proxy.statuses).toEqual([200, 204]);
      await page.close();
    } finally {
      await proxy.close();
    }
  }, 60_000);

  it(`loses nothing through a proxy that cuts the connection every ~20 frames mid-event: 0 gaps, 0 duplicates`, async () => {
    const d = await job();
    const proxy = await startProxy(p.plane.url, { cutEvery: 20 });
    try {
      const { url } = await d.streamToken('job');
      const page = await openPage(allowed.origin);
      await streamInPage(page, via(proxy, url));
      await claimAndAppend(d, 'job', FRAMES);
      await page.waitForFunction(() => (window as any).got.end !== null, undefined, { timeout: 120_000 });
      const g = await got(page);
      const seen = new Set(g.seqs);
      const gaps = Array.from({ length: FRAMES }, (_, i) => i).filter((i) => !seen.has(i)).length;
      const duplicates = g.seqs.length - seen.size;
      console.log(
        `cut stream: ${proxy.cuts} cuts, ${proxy.requests.filter((r) => r.includes('/journal')).length} requests, ${gaps} gaps, ${duplicates} duplicates`,
      );
      expect(proxy.cuts).toBeGreaterThanOrEqual(5);
      expect({ gaps, duplicates }).toEqual({ gaps: 0, duplicates: 0 });
      expect(g.seqs).toEqual(Array.from({ length: FRAMES }, (_, i) => i));
      await page.close();
    } finally {
      await proxy.close();
    }
  }, 180_000);
});

describe('a push receiver streams to a browser', () => {
  it('answers 202, then appends 100 frames with its delivery token and acks: a page on a stream token sees them live', async () => {
    const d = new HttpDispatch(p.plane.url, { token: p.token, namespace: `b${Date.now().toString(36)}${ns++}` });
    const accepted: Hit[] = [];
    const r = await receiver((hit, _req, res) => {
      accepted.push(hit);
      res.writeHead(202).end();
    });
    try {
      await d.configureQueue('hooks', { push: { url: r.url, concurrency: 1, timeoutMs: 5_000 } });
      await d.submit('hooks', new TextEncoder().encode('{}'), { id: 'pushed' });
      await until(() => accepted.length === 1, 'the delivery', 20_000);
      const delivery = accepted[0]!.delivery;
      expect((await d.get('pushed'))?.state).toBe('running');
      const page = await openPage(allowed.origin);
      await streamInPage(page, (await d.streamToken('pushed')).url);
      // The receiver, on its delivery token alone: half the frames, which the page shows while the job still runs.
      const as = new HttpDispatch(p.plane.url, { token: String(delivery.delivery_token), namespace: String(delivery.namespace) });
      const w = String(delivery.worker_id);
      const append = (s: number) =>
        as.journalAppend(
          'pushed',
          s,
          encodeFrame({ kind: FrameKind.VALUE, seq: s, body: new TextEncoder().encode(`token ${s} `), meta: null }),
          { workerId: w, attempt: 1 },
        );
      for (let s = 0; s < 50; s++) await append(s);
      await page.waitForFunction(() => (window as any).got.seqs.length === 50, undefined, { timeout: 30_000 });
      expect((await got(page)).end).toBeNull();
      expect((await d.get('pushed'))?.state).toBe('running');
      for (let s = 50; s < 100; s++) await append(s);
      await as.ack('pushed', w, { attempt: 1, result: new TextEncoder().encode('"done"') });
      await page.waitForFunction(() => (window as any).got.end !== null, undefined, { timeout: 30_000 });
      const g = await got(page);
      expect(g.seqs).toEqual(Array.from({ length: 100 }, (_, i) => i));
      expect(g.end.state).toBe('succeeded');
      expect(g.errors).toEqual([]);
      mkdirSync(shots, { recursive: true });
      await page.screenshot({ path: join(shots, 'push-receiver-stream.png') });
      await page.close();
      expect(accepted).toHaveLength(1);
    } finally {
      await d.configureQueue('hooks', { push: null });
      await closeReceiver(r.server);
    }
  }, 90_000);
});

describe('a browser is refused what its token does not allow', () => {
  it("job A's token on job B: 404, nothing of B in the answer; expired, tampered or a full token in the URL: 401, seen by the page as onError", async () => {
    const d = await job('a');
    await d.submit('q', new TextEncoder().encode('{"secret":"b-args"}'), { id: 'b' });
    const a = await d.streamToken('a');
    const short = await d.streamToken('a', { ttlMs: 1000 });
    const producer = await d.createToken('producer');
    const page = await openPage(allowed.origin);
    const status = (u: string) =>
      page.evaluate(async (x) => {
        const r = await fetch(x);
        return { status: r.status, body: await r.text() };
      }, u);
    const onB = await status(a.url.replace('/invocations/a/', '/invocations/b/'));
    expect(onB.status).toBe(404);
    expect(onB.body).not.toContain('b-args');
    const [claims, sig] = a.token.slice(4).split('.') as [string, string];
    const flip = (x: string, at: number) => `${x.slice(0, at)}${x[at] === 'A' ? 'B' : 'A'}${x.slice(at + 1)}`;
    // A changed signature, in its middle and in its last character (whose spare bits decoding would ignore).
    for (const bad of [flip(sig, 10), flip(sig, sig.length - 1)])
      expect((await status(a.url.replace(a.token, `lss_${claims}.${bad}`))).status).toBe(401);
    const tampered = a.url.replace(a.token, `lss_${claims}.${flip(sig, 20)}`);
    expect((await status(tampered)).status).toBe(401);
    expect((await status(a.url.replace(a.token, producer.token))).status).toBe(401);
    // The expired one, through streamJob: the page hears why, as onError.
    await page.waitForFunction((exp) => Date.now() > exp, short.expiresAt, { timeout: 10_000, polling: 100 });
    expect((await status(short.url)).status).toBe(401);
    await streamInPage(page, short.url);
    await page.waitForFunction(() => (window as any).got.errors.length > 0, undefined, { timeout: 20_000 });
    const g = await got(page);
    expect(g.errors[0]!.code).toBe('unauthorized');
    expect(g.errors[0]!.message).toContain('expired');
    expect(g.seqs).toEqual([]);
    await page.screenshot({ path: join(shots, 'stream-expired.png') });
    await page.close();
  }, 60_000);

  it('a page on an origin CORS_ORIGINS does not name is blocked by the browser; the named one is not', async () => {
    const d = await job();
    const { url } = await d.streamToken('job');
    const attempt = (page: Page) =>
      page.evaluate(
        async ({ u, planeUrl, token, namespace }) => {
          const out: Record<string, string> = {};
          try {
            out.fetch = String(
              (await fetch(`${planeUrl}/v1/ns/${namespace}/queues`, { headers: { authorization: `Bearer ${token}` } })).status,
            );
          } catch (e) {
            out.fetch = `blocked: ${(e as Error).name}`;
          }
          out.stream = await new Promise<string>((resolve) => {
            const es = new EventSource(u);
            es.addEventListener('end', () => {
              es.close();
              resolve('end');
            });
            es.addEventListener('error', () => es.readyState === 2 && resolve('refused'));
          });
          return out;
        },
        { u: url, planeUrl: p.plane.url, token: p.token, namespace: d.namespace },
      );
    await d.cancel('job'); // the stream has its end at once
    const ok = await openPage(allowed.origin);
    expect(await attempt(ok)).toEqual({ fetch: '200', stream: 'end' });
    const blocked = await openPage(other.origin);
    expect(await attempt(blocked)).toEqual({ fetch: 'blocked: TypeError', stream: 'refused' });
    await ok.close();
    await blocked.close();
  }, 60_000);
});
