/**
 * The dashboard, in real Chromium, against a plane of its own: signing in, live counts and
 * journals, cancel and retry from the page, what a producer token may not do, a wrong token.
 * Screenshots of each page at 1280 and 390 px go to a temporary directory, or, with
 * LAKESHORE_SHOTS=docs/dashboard (`npm run docs:screenshots`), to the README's pictures.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Browser, Page } from 'playwright-core';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { encodeEnvelope, encodeFrame, FrameKind, HttpDispatch } from '../../client/local/index.ts';
import { launch, plane, type TestPlane } from './harness.ts';
import { closeReceiver, json, receiver } from '../support/push-receiver.ts';
import { until, work } from '../support/wait.ts';

let browser: Browser;
let p: TestPlane;
let n = 0;
const shots = process.env.LAKESHORE_SHOTS
  ? join(process.cwd(), process.env.LAKESHORE_SHOTS)
  : mkdtempSync(join(tmpdir(), 'lakeshore-shots-'));
const bytes = (s: string) => new TextEncoder().encode(s);

beforeAll(async () => {
  p = await plane([]);
  browser = await launch();
  mkdirSync(shots, { recursive: true });
}, 120_000);

afterAll(async () => {
  await browser?.close();
  await p?.stop();
  if (!process.env.LAKESHORE_SHOTS) rmSync(shots, { recursive: true, force: true });
});

const root = (namespace: string) => new HttpDispatch(p.plane.url, { token: p.token, namespace });

async function signIn(token: string, namespace: string, width = 1280): Promise<Page> {
  const page = await browser.newPage({ viewport: { width, height: width > 600 ? 760 : 844 } });
  await page.goto(`${p.plane.url}/`);
  await page.fill('#token', token);
  await page.fill('#ns', namespace);
  await page.click('button[type=submit]');
  return page;
}

const cell = (page: Page, queue: string, column: number) =>
  page.evaluate(
    ([q, c]) => {
      const row = Array.from(document.querySelectorAll('tbody tr')).find((r) => r.querySelector('a')?.textContent === q);
      return row ? row.querySelectorAll('td')[c as number]!.textContent : null;
    },
    [queue, column] as const,
  );

describe('the dashboard', () => {
  it("shows a queue's counts live, a job's frames as they are written, and cancels from the page", async () => {
    const ns = `dash${n++}`;
    const d = root(ns);
    const producer = await d.createToken('producer');
    await d.submit('training', bytes('{}'), { id: 'warm' });
    // Another queue with work done, for the screenshot.
    await d.submitMany(
      'embeddings',
      Array.from({ length: 14 }, (_, i) => ({ envelope: bytes('{}'), opts: { id: `emb-${i}` } })),
    );
    const got = await d.claimMany('embeddings', 'cpu-1', 12, { leaseMs: 600_000 });
    for (const g of got.slice(0, 9)) await d.ack(g.id, 'cpu-1');
    await d.nack(got[9]!.id, 'cpu-1', { error: { type: 'ValueError', message: 'empty text' }, retry: false });
    const page = await signIn(producer.token, ns);
    await page.waitForSelector('table');
    expect(await cell(page, 'training', 1)).toBe('1');
    // A submitted job appears in the queue's count, driven by the feed.
    const t0 = Date.now();
    await d.submit('training', encodeEnvelope({ fn: 'train', args: [{ epochs: 3 }], kwargs: { lr: 0.01 } }), { id: 'run-42' });
    await page.waitForFunction(
      () => Array.from(document.querySelectorAll('tbody tr')).some((r) => r.querySelector('td:nth-child(2)')?.textContent === '2'),
      undefined,
      { timeout: 10_000 },
    );
    console.log(`dashboard: a submitted job counted on the page ${Date.now() - t0} ms after its submit`);
    await page.screenshot({ path: join(shots, 'queues-1280.png') });
    // Its page: frames as the worker writes them.
    await d.claimMany('training', 'gpu-1', 2, { leaseMs: 600_000 });
    await page.goto(`${p.plane.url}/#/i/run-42`);
    await page.waitForSelector('.facts');
    // What the job runs, as its envelope says it.
    expect(await page.textContent('.facts dt:has-text("call") + dd')).toBe('train({"epochs":3}, lr=0.01)');
    for (let s = 0; s < 3; s++) {
      await d.journalAppend(
        'run-42',
        s,
        encodeFrame({
          kind: FrameKind.VALUE,
          seq: s,
          body: bytes(JSON.stringify({ step: s, loss: +(1 / (s + 1)).toFixed(3) })),
          meta: null,
        }),
        { workerId: 'gpu-1' },
      );
      await page.waitForFunction((k) => document.querySelectorAll('.journal .value').length === k, s + 1, { timeout: 10_000 });
    }
    // Raw output, one stream however it fell into frames: the two bytes of an ö in two of them.
    const o = bytes('ö');
    const pieces = [
      bytes('token3 '),
      bytes('token4 '),
      Uint8Array.of(...bytes('w'), o[0]!),
      Uint8Array.of(o[1]!, ...bytes('rld ')),
      bytes('token7 '),
    ];
    for (const [i, body] of pieces.entries())
      await d.journalAppend('run-42', 3 + i, encodeFrame({ kind: FrameKind.CHUNK, seq: 3 + i, body, meta: null }), {
        workerId: 'gpu-1',
      });
    await page.waitForFunction(() => document.querySelector('.journal .chunk')?.textContent === 'token3 token4 wörld token7 ', undefined, {
      timeout: 10_000,
    });
    // The handler's log lines, live from the feed.
    await d.workerLog('training', 'gpu-1', [
      { id: 'run-42', level: 'info', message: 'loaded 12,000 samples' },
      { id: 'run-42', level: 'warn', message: 'grad norm 41.2 > 10, clipped' },
    ]);
    await page.waitForFunction(() => document.querySelectorAll('.logs li').length === 2, undefined, { timeout: 10_000 });
    expect(await page.textContent('.logs li.warn')).toContain('grad norm 41.2 > 10, clipped');
    await page.screenshot({ path: join(shots, 'job-1280.png') });
    await page.click('button:has-text("Cancel")');
    await page.waitForFunction(() => document.querySelector('.facts .badge')?.textContent === 'cancelled', undefined, { timeout: 10_000 });
    expect((await d.get('run-42'))!.state).toBe('cancelled');
    await page.close();
  }, 90_000);

  it('reads the overview at most about once a second while the feed is busy, and shows the last count', async () => {
    const ns = `dash${n++}`;
    const d = root(ns);
    const producer = await d.createToken('producer');
    await d.submit('busy', bytes('{}'), { id: 'first' });
    const page = await signIn(producer.token, ns);
    await page.waitForSelector('table');
    // Each read of the overview the page makes from here on (GET /v1/ns/:ns/queues, not a queue's own routes).
    const reads: number[] = [];
    page.on('request', (r) => {
      if (r.method() === 'GET' && new URL(r.url()).pathname === `/v1/ns/${ns}/queues`) reads.push(Date.now());
    });
    // Submits one after another for 2.5 s: a feed record each, hundreds in all.
    const t0 = Date.now();
    let submitted = 1;
    while (Date.now() - t0 < 2_500) await d.submit('busy', bytes('{}'), { id: `j${submitted++}` });
    // The count the page shows ends at the last one: the record that came last was redrawn.
    await page.waitForFunction(
      (k) => Array.from(document.querySelectorAll('tbody tr')).some((r) => r.querySelector('td:nth-child(2)')?.textContent === String(k)),
      submitted,
      { timeout: 10_000 },
    );
    const elapsed = Date.now() - t0;
    console.log(
      `dashboard: ${submitted - 1} submits over ${elapsed} ms, ${reads.length} reads of the overview`,
      reads.map((r) => r - t0),
    );
    expect(submitted).toBeGreaterThan(20);
    // A read at once, then at most one a second: without the bound it reads once per redraw, back to back.
    expect(reads.length).toBeLessThanOrEqual(Math.ceil(elapsed / 1_000) + 2);
    await page.close();
  }, 60_000);

  it('shows a namespace of many queues a page of 100 at a time, reading only that page, live past what one feed follows', async () => {
    const ns = `dash${n++}`;
    const d = root(ns);
    // 201 queues: three pages, and more than a namespace-wide feed follows (200), so the plane
    // refuses the page its feed and the page redraws on its own every few seconds.
    const names = Array.from({ length: 201 }, (_, i) => `p${String(i).padStart(3, '0')}`);
    for (let i = 0; i < names.length; i += 50)
      await Promise.all(names.slice(i, i + 50).map((q) => d.submit(q, bytes('{}'), { id: `j-${q}` })));
    const producer = await d.createToken('producer');
    const page = await signIn(producer.token, ns);
    // Each read of the overview: one page of queues (GET /v1/ns/:ns/queues), with its `after`.
    const reads: string[] = [];
    page.on('request', (r) => {
      const u = new URL(r.url());
      if (r.method() === 'GET' && u.pathname === `/v1/ns/${ns}/queues`) reads.push(u.searchParams.get('after') ?? '');
    });
    const shown = () => page.$$eval('tbody tr td:first-child a', (as) => as.map((a) => a.textContent));
    await page.waitForSelector('table');
    expect(await shown()).toEqual(names.slice(0, 100));
    expect(await page.isVisible('text=First page')).toBe(false);
    // Live without a feed: a job submitted now shows within a redraw.
    await d.submit('p000', bytes('{}'), { id: 'later' });
    await page.waitForFunction(() => document.querySelector('tbody tr td:nth-child(2)')?.textContent === '2', undefined, {
      timeout: 15_000,
    });
    expect(new Set(reads)).toEqual(new Set(['']));
    reads.length = 0;
    await page.click('text=Next page');
    await page.waitForFunction(() => document.querySelector('tbody tr a')?.textContent === 'p100');
    expect(await shown()).toEqual(names.slice(100, 200));
    await page.click('text=Next page');
    await page.waitForFunction(() => document.querySelectorAll('tbody tr').length === 1);
    expect(await shown()).toEqual(['p200']);
    expect(await page.isVisible('text=Next page')).toBe(false);
    expect(page.url()).toMatch(/#\/queues\/p199$/);
    await page.screenshot({ path: join(shots, 'queues-last-page.png'), fullPage: true });
    await page.click('text=First page');
    await page.waitForFunction(() => document.querySelectorAll('tbody tr').length === 100);
    // Each page read only itself, never every page of the namespace.
    expect(reads.slice(0, 3)).toEqual(['p099', 'p199', '']);
    await page.close();
  }, 60_000);

  it('waits longer between redraws that cost more: a slow read of the workers, redrawn at most a tenth of the time', async () => {
    const ns = `dash${n++}`;
    const d = root(ns);
    await d.submit('slow', bytes('{}'), { id: 'first' });
    const producer = await d.createToken('producer');
    const page = await signIn(producer.token, ns);
    await page.waitForSelector('table');
    // Each read of the workers takes 600 ms here (a namespace of many pages, or a plane far away).
    const reads: number[] = [];
    await page.route(`**/v1/ns/${ns}/workers*`, async (route) => {
      reads.push(Date.now());
      await work(600); // the plane's answer, slow: simulated work, not an order of events
      await route.continue();
    });
    await page.click('text=Workers');
    await page.waitForSelector('text=No worker heard from lately.');
    // The feed busy for 8 s: without the cost's share, a redraw a second (each 600 ms long).
    const t0 = Date.now();
    let submitted = 0;
    while (Date.now() - t0 < 8_000) await d.submit('slow', bytes('{}'), { id: `s${submitted++}` });
    const elapsed = Date.now() - t0;
    console.log(
      `dashboard workers: ${submitted} submits over ${elapsed} ms, ${reads.length} reads`,
      reads.map((r) => r - t0),
    );
    expect(submitted).toBeGreaterThan(20);
    // The first draw, the first record's at once, then one each 10 × 600 ms at most.
    expect(reads.length).toBeLessThanOrEqual(2 + Math.ceil(elapsed / 6_000));
    await page.close();
  }, 60_000);

  it('retries a failed job from the page, and it then succeeds', async () => {
    const ns = `dash${n++}`;
    const d = root(ns);
    const producer = await d.createToken('producer');
    await d.submit('emails', bytes('{}'), { id: 'bounce' });
    await d.claim('emails', 'w');
    const stack = 'SmtpError: SMTP 550 mailbox unavailable\n    at send (mail.js:3:9)\n    at deliver (mail.js:9:3)';
    const error = { message: 'SMTP 550 mailbox unavailable', type: 'SmtpError', stack };
    await d.journalAppend(
      'bounce',
      null,
      { kind: FrameKind.ERROR, seq: 0, body: bytes(JSON.stringify(error)), meta: null },
      { workerId: 'w' },
    );
    await d.nack('bounce', 'w', { error, retry: false });
    const page = await signIn(producer.token, ns);
    await page.waitForSelector('table');
    // The job's page: the error, its stack folded under it, a line each.
    await page.goto(`${p.plane.url}/#/i/bounce`);
    await page.waitForSelector('.facts details.stack');
    expect(await page.textContent('.facts .error')).toBe('SmtpError: SMTP 550 mailbox unavailable');
    await page.click('.facts details.stack summary');
    // The stack's frames, without its first line: that names the error the line above already shows.
    expect(await page.textContent('.facts details.stack pre')).toBe('    at send (mail.js:3:9)\n    at deliver (mail.js:9:3)');
    expect(await page.isVisible('.facts details.stack pre')).toBe(true);
    // Its journal's ERROR frame reads the same way, not as the JSON the worker wrote.
    await page.waitForSelector('.journal .frame-error details.stack');
    expect(await page.textContent('.journal .frame-error .error')).toBe('SmtpError: SMTP 550 mailbox unavailable');
    // A job waiting out a retry's backoff says when it is due, and its error as the last one.
    await d.submit('texts', bytes('{}'), { id: 'greylisted' });
    await d.claim('texts', 'w');
    await d.nack('greylisted', 'w', { error: { message: 'SMTP 451 try again later', type: 'SmtpError' }, retry: true, delayMs: 600_000 });
    await page.goto(`${p.plane.url}/#/i/greylisted`);
    await page.waitForSelector('.facts dt:has-text("due")');
    const facts = await page.$$eval('.facts dt', (dts) => dts.map((dt) => [dt.textContent, dt.nextElementSibling?.textContent ?? '']));
    expect(facts.find(([k]) => k === 'due')?.[1]).toMatch(/\(in 10 min\)$/);
    expect(facts.find(([k]) => k === 'last error')?.[1]).toBe('SmtpError: SMTP 451 try again later');
    expect(facts.some(([k]) => k === 'error')).toBe(false);
    await page.goto(`${p.plane.url}/#/q/emails/failed`);
    await page.waitForSelector('text=SmtpError: SMTP 550 mailbox unavailable');
    await page.screenshot({ path: join(shots, 'queue-1280.png') });
    await page.click('td button:has-text("Retry")');
    await page.waitForSelector('text=No failed jobs.');
    const again = await d.claim('emails', 'w2');
    expect(again).toMatchObject({ id: 'bounce', attempt: 2 });
    await d.ack('bounce', 'w2', { result: bytes('"sent"') });
    expect((await d.get('bounce'))!.state).toBe('succeeded');
    // The queues page counts it succeeded, and its sparkline (seeded by the plane, not by what
    // this page saw) shows it: a page opened after the fact.
    await d.submit('emails', bytes('{}'), { id: 'dropped' });
    await d.cancel('dropped');
    const later = await signIn(producer.token, ns);
    await later.waitForSelector('table');
    expect([await cell(later, 'emails', 4), await cell(later, 'emails', 5), await cell(later, 'emails', 6)]).toEqual(['1', '0', '1']);
    expect(await later.getAttribute('svg.spark', 'aria-label')).toMatch(/in emails: 1$/);
    expect(
      await later.evaluate(() =>
        document
          .querySelector('svg.spark polyline')!
          .getAttribute('points')!
          .split(' ')
          .some((p) => Number(p.split(',')[1]) < 12),
      ),
    ).toBe(true);
    await later.close();
    await page.close();
  }, 60_000);

  it('shows a producer no admin controls, and the plane refuses an admin request forged from the page (403)', async () => {
    const ns = `dash${n++}`;
    const d = root(ns);
    const producer = await d.createToken('producer');
    const adminToken = await d.createToken('admin');
    await d.submit('q', bytes('{}'), { id: 'x' });
    const page = await signIn(producer.token, ns);
    await page.waitForSelector('table');
    expect(await page.locator('button:has-text("Pause")').count()).toBe(0);
    expect(await page.locator('a:has-text("Tokens")').isVisible()).toBe(false);
    const forged = await page.evaluate(
      async ([namespace, token]) => {
        const r = await fetch(`/v1/ns/${namespace}/queues/q/pause`, { method: 'POST', headers: { authorization: `Bearer ${token}` } });
        return { status: r.status, body: await r.json() };
      },
      [ns, producer.token] as const,
    );
    expect(forged.status).toBe(403);
    expect(forged.body.error.code).toBe('forbidden');
    expect((await d.queueInfo('q')).paused).toBe(false);
    // An admin sees them, and its pause works.
    const admin = await signIn(adminToken.token, ns);
    await admin.waitForSelector('button:has-text("Pause")');
    await admin.click('button:has-text("Pause")');
    await admin.waitForSelector('button:has-text("Resume")');
    expect((await d.queueInfo('q')).paused).toBe(true);
    // A queue's schedules: an admin's to read and remove, each with the call its ticks submit.
    await d.setSchedule('q', 'nightly', {
      cron: '0 3 * * *',
      timezone: 'Europe/Berlin',
      envelope: encodeEnvelope({ fn: 'report', args: ['eu'], kwargs: { days: 7 } }),
    });
    await page.goto(`${p.plane.url}/#/q/q/queued`);
    await page.waitForSelector('text=x');
    expect(await page.locator('h2:has-text("Schedules")').count()).toBe(0); // a producer's page: none, and no refusal
    expect(await page.locator('#notice').isVisible()).toBe(false);
    await admin.goto(`${p.plane.url}/#/q/q/queued`);
    await admin.waitForSelector('h2:has-text("Schedules")');
    const row = await admin.locator('table:has(caption:has-text("cron schedules of q")) tbody tr').first().locator('td').allTextContents();
    expect(row.slice(0, 5)).toEqual(['nightly', '0 3 * * *', 'Europe/Berlin', 'report("eu", days=7)', '0']);
    await admin.screenshot({ path: join(shots, 'queue-schedules-1280.png') });
    await admin.click('button:has-text("Remove")');
    await until(async () => (await d.listSchedules('q')).length === 0, 'the schedule removed from the page', 10_000);
    await admin.goto(`${p.plane.url}/#/tokens`);
    await admin.waitForSelector('text=Create token');
    await admin.screenshot({ path: join(shots, 'tokens-1280.png') });
    await admin.setViewportSize({ width: 390, height: 844 });
    await admin.screenshot({ path: join(shots, 'tokens-390.png') });
    await page.close();
    await admin.close();
  }, 60_000);

  it('lists the workers heard from, with what each holds, and follows a worker that stops', async () => {
    const ns = `dash${n++}`;
    const d = root(ns);
    const producer = await d.createToken('producer');
    await d.submit('training', bytes('{}'), { id: 'run-7' });
    await d.claimMany('training', 'gpu-box-7:4242:a1b2', 1, {
      leaseMs: 600_000,
      worker: { queues: ['training'], host: 'gpu-box-7', pid: 4242, version: '0.1.0', concurrency: 4 },
    });
    const page = await signIn(producer.token, ns);
    await page.waitForSelector('table');
    await page.click('a:has-text("Workers")');
    await page.waitForSelector('text=gpu-box-7:4242');
    expect(await page.textContent('tbody')).toContain('run-7');
    await page.screenshot({ path: join(shots, 'workers-1280.png') });
    await page.setViewportSize({ width: 390, height: 844 });
    await page.screenshot({ path: join(shots, 'workers-390.png') });
    await d.workerStopped('training', 'gpu-box-7:4242:a1b2');
    await page.waitForFunction(() => document.querySelector('tbody .badge')?.textContent === 'stopped', undefined, { timeout: 10_000 });
    await page.close();
  }, 60_000);

  it("shows a push queue's target and its pusher's figures: in flight, the answer time, the last error", async () => {
    const ns = `dash${n++}`;
    const d = root(ns);
    const r = await receiver((hit, _req, res) =>
      hit.id === 'bad' ? json(res, 500, { error: 'model not loaded' }) : json(res, 200, { ok: hit.id }),
    );
    try {
      await d.configureQueue('webhooks', { push: { url: r.url, concurrency: 4, timeoutMs: 5_000 }, maxAttempts: 1 });
      for (let i = 0; i < 6; i++) await d.submit('webhooks', bytes('{}'), { id: `hook-${i}` });
      await d.submit('webhooks', bytes('{}'), { id: 'bad' });
      await until(
        async () => (await d.count('webhooks', 'succeeded')) === 6 && (await d.count('webhooks', 'failed')) === 1,
        'pushed',
        20_000,
      );
      const page = await signIn(p.token, ns);
      await page.waitForSelector('table');
      const push = (await cell(page, 'webhooks', 11))!;
      const host = new URL(r.url).host;
      expect(push).toContain(`→ ${host}`);
      expect(push).toContain('0/4 in flight · 6 delivered, 1 not');
      expect(push).toMatch(/answers in p50 \d+ ms, p99 \d+ ms/);
      expect(push).toMatch(/last error .*: 500 \(bad\)/);
      await page.screenshot({ path: join(shots, 'push-queue-1280.png') });
      await page.close();
    } finally {
      await d.configureQueue('webhooks', { push: null });
      await closeReceiver(r.server);
    }
  }, 60_000);

  it('says clearly when a token is refused, and fits a 390 px screen', async () => {
    const page = await signIn('lsk_0000000000000000_wrongwrongwrongwrongwrongwrongwrongwrongwro', 'default', 390);
    await page.waitForFunction(() => (document.getElementById('signin-error')?.textContent ?? '').length > 0, undefined, {
      timeout: 10_000,
    });
    expect(await page.textContent('#signin-error')).toContain('That token was refused');
    await page.screenshot({ path: join(shots, 'signin-390.png') });
    await page.setViewportSize({ width: 1280, height: 760 });
    await page.screenshot({ path: join(shots, 'signin-1280.png') });
    // The narrow pages, signed in.
    const ns = `dash${n++}`;
    const d = root(ns);
    const producer = await d.createToken('producer');
    await d.submit('emails', bytes('{}'), { id: 'm1' });
    await d.submit('emails', bytes('{}'), { id: 'bounce' });
    await d.claimMany('emails', 'w', 2);
    await d.nack('bounce', 'w', { error: { message: 'SMTP 550 mailbox unavailable', type: 'SmtpError' }, retry: false });
    const narrow = await signIn(producer.token, ns, 390);
    await narrow.waitForSelector('table');
    const overflow = await narrow.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
    expect(overflow).toBeLessThanOrEqual(0); // wide tables scroll in their own box, not the page
    await narrow.screenshot({ path: join(shots, 'queues-390.png') });
    await narrow.goto(`${p.plane.url}/#/q/emails/failed`);
    await narrow.waitForSelector('text=SmtpError');
    await narrow.screenshot({ path: join(shots, 'queue-390.png') });
    await narrow.goto(`${p.plane.url}/#/i/bounce`);
    await narrow.waitForSelector('.facts');
    await narrow.screenshot({ path: join(shots, 'job-390.png') });
    await page.close();
    await narrow.close();
  }, 60_000);
});
