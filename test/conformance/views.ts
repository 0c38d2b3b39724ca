/**
 * Conformance: what an operator sees, the same on every plane. The overview of each queue (live
 * counts from the rows, the longest wait, settings) and pages of a queue's jobs in one state, in
 * the documented order, walked with a cursor that neither skips nor repeats a job.
 */
import { beforeEach, describe, expect, it } from 'vitest';
import {
  BadRequestError,
  NotFoundError,
  type DispatchPlane,
  type FeedItem,
  type InvocationSummary,
  type JobRecord,
  type State,
} from '../../client/local/index.ts';
import parsePrometheusTextFormat from 'parse-prometheus-text-format';
import { until } from '../support/wait.ts';
import { attachedFeed, type PlaneHandle } from './planes.ts';

const bytes = (s: string) => new TextEncoder().encode(s);

/** Every page of a listing, walked with its cursor. */
async function walk(d: DispatchPlane, queue: string, state: State, limit: number): Promise<InvocationSummary[][]> {
  const pages: InvocationSummary[][] = [];
  let cursor: string | null = null;
  do {
    const page = await d.list(queue, { state, limit, cursor });
    pages.push(page.items);
    cursor = page.cursor;
  } while (cursor !== null && pages.length < 100);
  return pages;
}

export function views(handle: () => PlaneHandle) {
  describe('views', () => {
    let h: PlaneHandle;
    let d: DispatchPlane;
    beforeEach(() => {
      h = handle();
      d = h.plane;
    });

    it("the overview counts each queue's delayed, queued and running jobs from the rows, with its longest wait and settings", async () => {
      const t0 = h.now();
      for (let i = 0; i < 5; i++) await d.submit('a', bytes('x'), { id: `a${i}` });
      await d.submit('a', bytes('x'), { id: 'later', delayMs: 3_600_000 });
      await d.claimMany('a', 'w', 2);
      await d.submit('b', bytes('x'), { id: 'b0' });
      await d.submit('c', bytes('x'), { id: 'c0' });
      await d.nack((await d.claim('c', 'w'))!.id, 'w', { error: 'no', retry: false });
      await d.configureQueue('b', { maxAttempts: 7 });
      await d.pauseQueue('b');
      await h.elapse(50);
      const all = await d.overview();
      expect(all.map((q) => q.queue).sort()).toEqual(['a', 'b', 'c']);
      expect(all.find((q) => q.queue === 'c')!.counts).toEqual({
        delayed: 0,
        queued: 0,
        running: 0,
        succeeded: 0,
        failed: 1,
        cancelled: 0,
      });
      const a = all.find((q) => q.queue === 'a')!;
      expect(a.counts).toEqual({ delayed: 1, queued: 3, running: 2, succeeded: 0, failed: 0, cancelled: 0 });
      expect(a.capped).toEqual([]);
      expect(a.paused).toBe(false);
      // The longest-waiting queued job has waited since its submit.
      expect(a.oldestQueuedMs).toBeGreaterThanOrEqual(50);
      expect(a.oldestQueuedMs).toBeLessThanOrEqual(h.now() - t0 + 1);
      const b = all.find((q) => q.queue === 'b')!;
      expect(b).toMatchObject({ paused: true, counts: { delayed: 0, queued: 1, running: 0 } });
      expect(b.settings.maxAttempts).toBe(7);
      expect(await d.listQueues()).toEqual(['a', 'b', 'c']);
      // Nothing waiting: no age.
      await d.claimMany('b', 'w', 5);
      await d.resumeQueue('b');
      await d.claimMany('b', 'w', 5);
      expect((await d.overview(['b']))[0]).toMatchObject({ queue: 'b', counts: { queued: 0, running: 1 }, oldestQueuedMs: null });
      // The queues named, in that order; one that never held work, empty.
      const named = await d.overview(['never', 'c', 'a']);
      expect(named.map((q) => q.queue)).toEqual(['never', 'c', 'a']);
      expect(named[0]).toMatchObject({ paused: false, capped: [], oldestQueuedMs: null, pushing: null });
      expect(named[0]!.counts).toEqual({ delayed: 0, queued: 0, running: 0, succeeded: 0, failed: 0, cancelled: 0 });
      expect(named[0]!.recent.succeeded).toEqual(new Array(30).fill(0));
      expect(await d.listQueues()).toEqual(['a', 'b', 'c']); // asking about a queue does not make one
      // Named twice, answered twice; only the queues named are answered.
      expect((await d.overview(['c', 'c'])).map((q) => q.counts.failed)).toEqual([1, 1]);
      const many = Array.from({ length: 150 }, (_, i) => `m${i}`); // past the 100 one request names
      expect((await d.overview(many)).map((q) => q.queue)).toEqual(many);
      expect(await d.listQueues()).toEqual(['a', 'b', 'c']);
    });

    it('the overview counts finished jobs, and the jobs finished lately per 10 s where the transitions ran', async () => {
      for (let i = 0; i < 4; i++) await d.submit('f', bytes('x'), { id: `f${i}` });
      const [a, b, c] = await d.claimMany('f', 'w', 3);
      await d.ack(a!.id, 'w');
      await d.ack(b!.id, 'w');
      await d.nack(c!.id, 'w', { error: 'no', retry: false });
      await d.cancel('f3');
      const [f] = await d.overview(['f']);
      expect(f!.counts).toEqual({ delayed: 0, queued: 0, running: 0, succeeded: 2, failed: 1, cancelled: 1 });
      const sum = (xs: number[]) => xs.reduce((x, y) => x + y, 0);
      expect(f!.recent).toMatchObject({ bucketMs: 10_000 });
      expect(f!.recent.succeeded).toHaveLength(30);
      expect([sum(f!.recent.succeeded), sum(f!.recent.failed)]).toEqual([2, 1]);
      // The last bucket is the one filling now.
      expect(f!.recent.until - 10_000).toBeLessThanOrEqual(h.now());
      expect(f!.recent.until).toBeGreaterThan(h.now() - 1_000);
      expect(f!.recent.succeeded[29]! + f!.recent.succeeded[28]!).toBe(2);
    });

    it('counts succeeded jobs up to 10,000, and past that says there are at least that many; queued jobs exactly', async () => {
      const ids = Array.from({ length: 10_001 }, (_, i) => `s${i}`);
      for (let i = 0; i < ids.length; i += 1000)
        await d.submitMany(
          'big',
          ids.slice(i, i + 1000).map((id) => ({ envelope: bytes('x'), opts: { id } })),
        );
      // The backlog is counted whole: no cap, and nothing named in `capped`.
      expect((await d.overview(['big']))[0]).toMatchObject({ counts: { queued: 10_001 }, capped: [] });
      const ack = async (n: number) => {
        for (let done = 0; done < n; ) {
          const got = await d.claimMany('big', 'w', Math.min(1000, n - done));
          await Promise.all(got.map((g) => d.ack(g.id, 'w')));
          done += got.length;
        }
      };
      await ack(10_000);
      expect((await d.overview(['big']))[0]).toMatchObject({ counts: { succeeded: 10_000, queued: 1 }, capped: [] });
      await ack(1);
      expect((await d.overview(['big']))[0]).toMatchObject({ counts: { succeeded: 10_000, queued: 0 }, capped: ['succeeded'] });
    }, 120_000);

    it('lists queued jobs in claim order, page by page, each once', async () => {
      const prios = [0, 2, 1, 2, 0, 1, 2, 0, 1, 0, 2];
      for (const [i, p] of prios.entries()) await d.submit('q', bytes('x'), { id: `j${i}`, priority: p });
      const pages = await walk(d, 'q', 'queued', 3);
      expect(pages.map((p) => p.length)).toEqual([3, 3, 3, 2]);
      const order = prios
        .map((p, i) => ({ p, i }))
        .sort((x, y) => y.p - x.p || x.i - y.i)
        .map((x) => `j${x.i}`);
      expect(pages.flat().map((j) => j.id)).toEqual(order);
      // The order claims take.
      const claimed = await d.claimMany('q', 'w', 4);
      expect(claimed.map((c) => c.id)).toEqual(order.slice(0, 4));
      expect(pages[0]![0]).toMatchObject({ id: order[0], queue: 'q', namespace: d.namespace, state: 'queued', attempt: 0 });
      expect(pages[0]![0]).not.toHaveProperty('envelope');
    });

    it('lists finished jobs newest first, running by lease deadline, delayed by due time', async () => {
      for (let i = 0; i < 7; i++) await d.submit('q', bytes('x'), { id: `f${i}` });
      for (let i = 0; i < 7; i++) {
        const c = (await d.claim('q', 'w'))!;
        await d.nack(c.id, 'w', { error: `bad ${c.id}`, retry: false });
      }
      const failed = await walk(d, 'q', 'failed', 2);
      expect(failed.flat().map((j) => j.id)).toEqual(['f6', 'f5', 'f4', 'f3', 'f2', 'f1', 'f0']);
      expect(failed[0]![0]!.error).toMatchObject({ message: 'bad f6' });
      expect(failed.flat().every((j) => j.finishedAt !== null)).toBe(true);
      await d.submit('r', bytes('x'), { id: 'long' });
      await d.submit('r', bytes('x'), { id: 'short' });
      await d.claim('r', 'w', { leaseMs: 60_000 });
      await d.claim('r', 'w', { leaseMs: 10_000 });
      expect((await walk(d, 'r', 'running', 1)).flat().map((j) => j.id)).toEqual(['short', 'long']);
      await d.submit('r', bytes('x'), { id: 'in2h', delayMs: 7_200_000 });
      await d.submit('r', bytes('x'), { id: 'in1h', delayMs: 3_600_000 });
      expect((await walk(d, 'r', 'delayed', 1)).flat().map((j) => j.id)).toEqual(['in1h', 'in2h']);
      expect((await d.list('r', { state: 'succeeded' })).items).toEqual([]);
    });

    it('refuses a bad state, limit or cursor, and a cursor of another state', async () => {
      await d.submit('q', bytes('x'), { id: 'a' });
      await d.submit('q', bytes('x'), { id: 'b' });
      const first = await d.list('q', { limit: 1 });
      expect(first.cursor).not.toBeNull();
      await expect(d.list('q', { state: 'nope' as State })).rejects.toBeInstanceOf(BadRequestError);
      await expect(d.list('q', { limit: 0 })).rejects.toBeInstanceOf(BadRequestError);
      await expect(d.list('q', { limit: 1001 })).rejects.toBeInstanceOf(BadRequestError);
      await expect(d.list('q', { cursor: 'garbage' })).rejects.toBeInstanceOf(BadRequestError);
      await expect(d.list('q', { state: 'failed', cursor: first.cursor })).rejects.toBeInstanceOf(BadRequestError);
      expect((await d.list('q', { cursor: first.cursor })).items.map((j) => j.id)).toEqual(['b']);
    });

    it('gets many jobs of any queue at once, in the order asked, as a listing shows them; null where there is none', async () => {
      await d.submit('q', bytes('x'), { id: 'a' });
      await d.submit('other', bytes('y'), { id: 'b' });
      await d.claim('other', 'w');
      await d.cancel('a');
      const rows = await d.getMany(['b', 'nope', 'a', 'b']);
      expect(rows.map((r) => r && [r.id, r.queue, r.state, r.attempt, r.workerId])).toEqual([
        ['b', 'other', 'running', 1, 'w'],
        null,
        ['a', 'q', 'cancelled', 0, null],
        ['b', 'other', 'running', 1, 'w'],
      ]);
      // As a listing shows a job: its row, without the envelope and result.
      expect(rows[2]).toEqual((await d.list('q', { state: 'cancelled' })).items[0]);
      expect(rows[0]).not.toHaveProperty('envelope');
      for (const bad of [[], [''], Array.from({ length: 1001 }, (_, i) => `j${i}`), [1 as unknown as string]])
        await expect(d.getMany(bad)).rejects.toBeInstanceOf(BadRequestError);
    });
  });
}

export function retention(handle: () => PlaneHandle) {
  describe('retention', () => {
    let h: PlaneHandle;
    let d: DispatchPlane;
    beforeEach(() => {
      h = handle();
      d = h.plane;
    });

    it("purges finished jobs past their queue's retention with their frames; waiting and running ones stay, and counts stay right", async () => {
      const info = await d.configureQueue('r', { retentionMs: 300 });
      expect(info.settings.retentionMs).toBe(300);
      for (let i = 0; i < 6; i++) await d.submit('r', bytes('x'), { id: `r${i}` });
      const claimed = await d.claimMany('r', 'w', 4, { leaseMs: 120_000 });
      expect(claimed.map((c) => c.id)).toEqual(['r0', 'r1', 'r2', 'r3']);
      await d.journalAppend('r0', 0, { kind: 0, seq: 0, body: bytes('frame'), meta: null }, { workerId: 'w' });
      await d.ack('r0', 'w', { result: bytes('ok') });
      await d.nack('r1', 'w', { error: 'no', retry: false });
      await d.cancel('r4');
      // Finished: r0, r1, r4. Their retention runs out; the plane's own timer purges them.
      await h.elapse(301);
      await until(
        async () => (await d.get('r0')) === null && (await d.get('r1')) === null && (await d.get('r4')) === null,
        'the finished jobs to be purged',
        30_000,
      );
      expect((await d.get('r2'))?.state).toBe('running');
      expect((await d.get('r5'))?.state).toBe('queued');
      const [q] = await d.overview(['r']);
      expect(q!.counts).toEqual({ delayed: 0, queued: 1, running: 2, succeeded: 0, failed: 0, cancelled: 0 });
      for (const s of ['succeeded', 'failed', 'cancelled'] as const) {
        expect((await d.list('r', { state: s })).items, s).toEqual([]);
        expect(await d.count('r', s), s).toBe(0);
      }
      const gone = await d.result('r0', { timeoutMs: 0 }).then(
        () => null,
        (e: unknown) => e,
      );
      expect(gone).toBeInstanceOf(NotFoundError);
      expect((gone as Error).message).toContain('retention');
      await expect(d.journalPage('r0')).rejects.toBeInstanceOf(NotFoundError);
      // The ones still running finish later, and are kept for their own retention.
      await d.ack('r2', 'w');
      expect((await d.get('r2'))?.state).toBe('succeeded');
    }, 60_000);

    it("removes a finished job's frames journal_retention_ms after it finished, alone: the job, its result and a running job's frames stay", async () => {
      // A window a loaded machine cannot run past between two quick calls: "inside its window" holds.
      const W = h.shortLeaseMs;
      expect((await d.configureQueue('jr', { journalRetentionMs: W })).settings.journalRetentionMs).toBe(W);
      for (let i = 0; i < 3; i++) await d.submit('jr', bytes('x'), { id: `jr${i}` });
      expect((await d.claimMany('jr', 'w', 3, { leaseMs: 120_000 })).map((c) => c.id)).toEqual(['jr0', 'jr1', 'jr2']);
      for (const id of ['jr0', 'jr1', 'jr2'])
        for (let seq = 0; seq < 3; seq++)
          await d.journalAppend(id, seq, { kind: 0, seq, body: bytes(`${id}.${seq}`), meta: null }, { workerId: 'w' });
      await d.ack('jr0', 'w', { result: bytes('ok') });
      await d.nack('jr1', 'w', { error: 'no', retry: false });
      expect((await d.journalPage('jr0')).frames).toHaveLength(3); // inside its window
      await h.elapse(W + 1);
      const gone = async (id: string) => (await d.journalPage(id)).frames.length === 0;
      await until(async () => (await gone('jr0')) && (await gone('jr1')), 'the finished jobs to lose their frames', 30_000);
      // Read as a trim leaves a journal: no frames, the last seq removed, the job's end as before.
      expect(await d.journalPage('jr0')).toMatchObject({ frames: [], trimmedBefore: 2, done: true, state: 'succeeded' });
      expect(new TextDecoder().decode((await d.result('jr0', { timeoutMs: 0 }))!)).toBe('ok');
      expect((await d.get('jr1'))?.state).toBe('failed');
      expect(await d.count('jr', 'succeeded')).toBe(1);
      // Still running: its frames stay. Once it finishes they wait out its own window.
      expect((await d.journalPage('jr2')).frames.map((f) => f.seq)).toEqual([0, 1, 2]);
      await d.ack('jr2', 'w');
      expect((await d.journalPage('jr2')).frames).toHaveLength(3);
      await h.elapse(W + 1);
      await until(() => gone('jr2'), "the last job's frames to go after its own window", 30_000);
      expect((await d.get('jr2'))?.state).toBe('succeeded');
      // From 0 ms (frames go at the next pass) to 365 days; null: frames go with their job.
      await expect(d.configureQueue('jr', { journalRetentionMs: -1 })).rejects.toBeInstanceOf(BadRequestError);
      await expect(d.configureQueue('jr', { journalRetentionMs: 400 * 86_400_000 })).rejects.toBeInstanceOf(BadRequestError);
      expect((await d.configureQueue('jr', { journalRetentionMs: 0 })).settings.journalRetentionMs).toBe(0);
      expect((await d.configureQueue('jr', { journalRetentionMs: null })).settings.journalRetentionMs).toBeNull();
    }, 60_000);

    it("takes retention_ms from 1 ms to 365 days, and null for the plane's default (7 days)", async () => {
      await expect(d.configureQueue('r', { retentionMs: 0 })).rejects.toBeInstanceOf(BadRequestError);
      await expect(d.configureQueue('r', { retentionMs: 400 * 86_400_000 })).rejects.toBeInstanceOf(BadRequestError);
      expect((await d.configureQueue('r', { retentionMs: 86_400_000 })).settings.retentionMs).toBe(86_400_000);
      expect((await d.configureQueue('r', { retentionMs: null })).settings.retentionMs).toBeNull();
    });

    it('keeps a time_limit_ms for its jobs, which its queue info tells workers, and null clears it', async () => {
      await expect(d.configureQueue('r', { timeLimitMs: 0 })).rejects.toBeInstanceOf(BadRequestError);
      expect((await d.queueInfo('r')).settings.timeLimitMs).toBeNull();
      expect((await d.configureQueue('r', { timeLimitMs: 1_500 })).settings.timeLimitMs).toBe(1_500);
      expect((await d.configureQueue('r', { retentionMs: 86_400_000 })).settings.timeLimitMs).toBe(1_500); // kept
      expect((await d.queueInfo('r')).settings.timeLimitMs).toBe(1_500);
      expect((await d.configureQueue('r', { timeLimitMs: null })).settings.timeLimitMs).toBeNull();
    });

    it('keeps a push target; its secret is shown once, kept on change, new on rotation, gone with push: null', async () => {
      const q = 'push-settings'; // no jobs: nothing is delivered to the port that listens nowhere
      const url = 'http://127.0.0.1:9/hook';
      const SECRET = /^whsec_[A-Za-z0-9+/]{43}=$/;
      expect((await d.queueInfo(q)).settings.push).toBeNull();
      for (const bad of [
        { url: 'ftp://127.0.0.1/x' },
        { url: 'http://example.com/hook' }, // http only on loopback
        { url: 'not a url' },
        { url: 'https://user:pw@example.com/' },
        { url, concurrency: 0 },
        { url, concurrency: 1.5 },
        { url, timeoutMs: 50 },
        { url, timeoutMs: 16 * 60_000 },
        { url, batchSize: 0 },
        { url, batchSize: 101 },
        { url, batchSize: 2.5 },
      ])
        await expect(d.configureQueue(q, { push: bad }), JSON.stringify(bad)).rejects.toBeInstanceOf(BadRequestError);
      expect((await d.queueInfo(q)).settings.push).toBeNull(); // refused whole
      const set = (await d.configureQueue(q, { push: { url, concurrency: 4, timeoutMs: 5_000 } })).settings.push;
      expect(set).toEqual({ url, concurrency: 4, timeoutMs: 5_000, batchSize: 1, secret: expect.stringMatching(SECRET) });
      expect((await d.queueInfo(q)).settings.push).toEqual({ url, concurrency: 4, timeoutMs: 5_000, batchSize: 1 }); // never again
      // Changing the target keeps the secret, and does not show it; another setting keeps the target.
      expect((await d.configureQueue(q, { push: { url, concurrency: 2, batchSize: 100 } })).settings.push).toEqual({
        url,
        concurrency: 2,
        timeoutMs: 30_000,
        batchSize: 100,
      });
      expect((await d.configureQueue(q, { ttlMs: 60_000 })).settings.push).toEqual({
        url,
        concurrency: 2,
        timeoutMs: 30_000,
        batchSize: 100,
      });
      const rotated = (await d.configureQueue(q, { push: { url, rotateSecret: true } })).settings.push;
      expect(rotated?.secret).toMatch(SECRET);
      expect(rotated?.secret).not.toBe(set?.secret);
      expect((await d.configureQueue(q, { push: null })).settings.push).toBeNull();
      const again = (await d.configureQueue(q, { push: { url } })).settings.push;
      expect(again).toEqual({ url, concurrency: 8, timeoutMs: 30_000, batchSize: 1, secret: expect.stringMatching(SECRET) });
      expect([set?.secret, rotated?.secret]).not.toContain(again?.secret);
      await d.configureQueue(q, { push: null, ttlMs: null });
    });
  });
}

export function observing(handle: () => PlaneHandle) {
  describe('feed and metrics', () => {
    let h: PlaneHandle;
    let d: DispatchPlane;
    beforeEach(() => {
      h = handle();
      d = h.plane;
    });

    it('the feed tells each transition of the queue as it commits, in order', async () => {
      const ac = new AbortController();
      const it = await attachedFeed(d, 'e', ac.signal);
      // An envelope with a traceparent: its records carry the trace id, its later ones too.
      const traceId = 'c0ffee'.padEnd(32, '0');
      await d.submit(
        'e',
        bytes(JSON.stringify({ v: 1, fn: 'f', args: [], kwargs: {}, traceparent: `00-${traceId}-${'b'.repeat(16)}-01` })),
        { id: 'a' },
      );
      await d.submit('e', bytes('x'), { id: 'later', delayMs: 3_600_000 });
      // Another spelling of the key (spaces around the colon) is read too.
      const spacedId = 'facade'.padEnd(32, '1');
      await d.submit('e', bytes(`{"v":1,"fn":"f","args":[],"kwargs":{},"traceparent" : "00-${spacedId}-${'c'.repeat(16)}-01"}`), {
        id: 'spaced',
      });
      await d.cancel('a');
      await d.cancel('later');
      await d.cancel('spaced');
      const seen: FeedItem[] = [];
      while (seen.filter((r) => r.kind === 'job' && !r.id.startsWith('probe')).length < 6) {
        const r = await it.next();
        if (r.done) break;
        seen.push(r.value);
      }
      ac.abort();
      const mine = seen.flatMap((r) => (r.kind === 'job' && !r.id.startsWith('probe') ? [`${r.id}:${r.status}`] : []));
      expect(mine).toEqual(['a:queued', 'later:delayed', 'spaced:queued', 'a:cancelled', 'later:cancelled', 'spaced:cancelled']);
      const rec = seen.find((r) => r.kind === 'job' && r.id === 'a') as JobRecord;
      expect(rec).toMatchObject({ kind: 'job', queue: 'e', attempt: 0, at: expect.any(Number) });
      const traces = seen.flatMap((r) => (r.kind === 'job' && !r.id.startsWith('probe') ? [`${r.id}:${r.trace_id ?? '-'}`] : []));
      expect(traces).toEqual([`a:${traceId}`, 'later:-', `spaced:${spacedId}`, `a:${traceId}`, 'later:-', `spaced:${spacedId}`]);
    });

    it("a failed job's record carries its error whole up to 2,048 characters of JSON, else its type and message's start, marked truncated", async () => {
      const ac = new AbortController();
      const it = await attachedFeed(d, 'fe', ac.signal);
      const small = { type: 'ValueError', message: 'bad input', stack: 'at f (x.py:1)' };
      const large = { type: 'RuntimeError', message: `oom ${'m'.repeat(1000)}`, stack: 's'.repeat(100_000) };
      for (const [id, error] of [
        ['small', small],
        ['large', large],
      ] as const) {
        await d.submit('fe', bytes('x'), { id });
        let c = (await d.claim('fe', 'w'))!;
        // The feed's probes came first: they succeed.
        for (; c.id !== id; c = (await d.claim('fe', 'w'))!) await d.ack(c.id, 'w', { attempt: c.attempt, result: null });
        await d.nack(c.id, 'w', { attempt: c.attempt, error, retry: false });
      }
      const failed: JobRecord[] = [];
      while (failed.length < 2) {
        const r = await it.next();
        if (r.done) break;
        if (r.value.kind === 'job' && r.value.status === 'failed') failed.push(r.value);
      }
      ac.abort();
      expect(failed.map((r) => [r.id, r.error])).toEqual([
        ['small', small],
        ['large', { type: 'RuntimeError', message: `oom ${'m'.repeat(495)}\u2026`, truncated: true }],
      ]);
      // The job itself keeps the whole error.
      expect((await d.get('large'))!.error).toEqual(large);
    });

    it("the namespace-wide feed tells every queue's transitions, of a queue that starts meanwhile too; kinds keep one kind", async () => {
      await d.submit('n1', bytes('x'), { id: 'n1-old' });
      await d.cancel('n1-old');
      const ac = new AbortController();
      const it = d.events(null, { signal: ac.signal })[Symbol.asyncIterator]();
      const seen: FeedItem[] = [];
      // One read at a time: a read that a probe's wait gave up on is still the next one.
      let pending: Promise<IteratorResult<FeedItem>> | null = null;
      const next = () => (pending ??= it.next());
      /** Submits probes to `queue` until one is told (the reader follows the queue from then on). */
      const attach = async (queue: string) => {
        for (let i = 0; i < 50; i++) {
          await d.submit(queue, bytes('x'), { id: `${queue}-probe${i}` });
          const deadline = Date.now() + 200;
          while (Date.now() < deadline) {
            const r = await Promise.race([next(), new Promise<null>((res) => setTimeout(() => res(null), deadline - Date.now()))]);
            if (r === null) break;
            pending = null;
            if (r.done) return false;
            seen.push(r.value);
            if (r.value.kind === 'job' && r.value.queue === queue && r.value.id.startsWith(`${queue}-probe`)) return true;
          }
        }
        return false;
      };
      expect(await attach('n1')).toBe(true);
      // n2 starts now: over HTTP the stream looks for new queues every 2 s and joins them.
      expect(await attach('n2')).toBe(true);
      await d.submit('n1', bytes('x'), { id: 'a' });
      await d.submit('n2', bytes('x'), { id: 'b' });
      await d.cancel('b');
      await d.cancel('a');
      const mine = () => seen.flatMap((r) => (r.kind === 'job' && !r.id.includes('probe') ? [`${r.queue}/${r.id}:${r.status}`] : []));
      while (mine().length < 4) {
        const r = await next();
        pending = null;
        if (r.done) break;
        seen.push(r.value);
      }
      ac.abort();
      expect(mine().filter((x) => x.startsWith('n1/'))).toEqual(['n1/a:queued', 'n1/a:cancelled']);
      expect(mine().filter((x) => x.startsWith('n2/'))).toEqual(['n2/b:queued', 'n2/b:cancelled']);
      // kinds: only worker records (a claim that carries its worker's card is one), in this process.
      const w = h.inProcess ?? d;
      const ac2 = new AbortController();
      const workersOnly = w.events('k', { signal: ac2.signal, kinds: ['worker'] })[Symbol.asyncIterator]();
      const first = workersOnly.next();
      let told: FeedItem | null = null;
      for (let i = 0; i < 50 && !told; i++) {
        await w.submit('k', bytes('x'), { id: `k${i}` });
        await w.claimMany('k', `wk${i}`, 1, { worker: { queues: ['k'] } });
        told = await Promise.race([first, new Promise<null>((res) => setTimeout(() => res(null), 200))]).then((r) =>
          r && !r.done ? r.value : null,
        );
      }
      ac2.abort();
      expect(told).toMatchObject({ kind: 'worker', queue: 'k', status: 'started' });
      await expect(
        d
          .events('k', { kinds: ['jobs' as 'job'] })
          [Symbol.asyncIterator]()
          .next(),
      ).rejects.toBeInstanceOf(BadRequestError);
    });

    it('a reader sees the transitions of every process on the plane, in commit order (the file plane: a worker in another process)', async () => {
      // On the file plane, producer verbs run in this process and worker verbs in a second one on
      // the same file; the reader is this process's own plane.
      const reader = h.inProcess ?? d;
      const ac = new AbortController();
      const it = await attachedFeed(reader, 'xp', ac.signal);
      await d.submit('xp', bytes('x'), { id: 'xp1' });
      expect((await d.claim('xp', 'w-other', { kind: 'filo' }))?.id).toBe('xp1'); // the newest: not a probe
      await d.ack('xp1', 'w-other', { result: bytes('ok') });
      const seen: string[] = [];
      const deadline = Date.now() + 10_000;
      while (!seen.some((s) => s.startsWith('succeeded')) && Date.now() < deadline) {
        const r = await Promise.race([it.next(), new Promise<null>((res) => setTimeout(() => res(null), deadline - Date.now()))]);
        if (!r || r.done) break;
        if (r.value.kind === 'job' && r.value.id === 'xp1')
          seen.push(`${r.value.status}${r.value.worker_id ? ` by ${r.value.worker_id}` : ''}`);
      }
      ac.abort();
      expect(seen).toEqual(['queued', 'running by w-other', 'succeeded by w-other']);
    });

    it("tells a worker's log lines on the feed as worker records; bad lines are refused", async () => {
      const w = h.inProcess ?? d;
      const ac = new AbortController();
      const it = w.events('lg', { signal: ac.signal, kinds: ['worker'] })[Symbol.asyncIterator]();
      const first = it.next();
      const traceId = 'a'.repeat(32);
      let told: FeedItem | null = null;
      // Attached once a line reaches it (bounded, line by line).
      for (let i = 0; i < 50 && !told; i++) {
        await w.workerLog('lg', 'gpu-1', [{ id: `job-${i}`, level: 'warn', message: `step ${i}: loss is nan`, trace_id: traceId }]);
        told = await Promise.race([first, new Promise<null>((res) => setTimeout(() => res(null), 200))]).then((r) =>
          r && !r.done ? r.value : null,
        );
      }
      ac.abort();
      expect(told).toMatchObject({
        kind: 'worker',
        worker_id: 'gpu-1',
        queue: 'lg',
        level: 'warn',
        message: expect.stringMatching(/^step \d+: loss is nan$/),
        trace_id: traceId,
        at: expect.any(Number),
      });
      for (const bad of [
        [{ id: 'j', level: 'loud', message: 'x' }],
        [{ id: 'j', level: 'info', message: 'x', trace_id: 'xyz' }],
        Array.from({ length: 101 }, () => ({ id: 'j', level: 'info', message: 'x' })),
      ]) {
        await expect(w.workerLog('lg', 'gpu-1', bad as never)).rejects.toBeInstanceOf(BadRequestError);
      }
    });

    it('lists the workers heard from, with their card and what each holds; a stop is told', async () => {
      await d.submit('wq', bytes('x'), { id: 'held' });
      await d.claimMany('wq', 'w-a', 1, {
        leaseMs: 60_000,
        worker: { queues: ['wq'], host: 'h1', pid: 7, version: '0.1.0', concurrency: 2 },
      });
      const w = (await d.workers()).find((x) => x.worker_id === 'w-a');
      expect(w).toMatchObject({
        status: 'active',
        queues: ['wq'],
        host: 'h1',
        pid: 7,
        version: '0.1.0',
        concurrency: 2,
        holding: [{ id: 'held', queue: 'wq' }],
      });
      expect(h.now() - w!.last_seen).toBeLessThan(60_000);
      await d.workerStopped('wq', 'w-a');
      expect((await d.workers()).find((x) => x.worker_id === 'w-a')!.status).toBe('stopped');
    });

    it('a namespace of more queues than one request answers: overview, queues, workers and metrics answer every one', async () => {
      // The HTTP plane answers 100 queues a request (its calls to their objects are bounded) and
      // the client follows the pages; a local plane answers the whole. Each plane answers the same.
      const names = Array.from({ length: 103 }, (_, i) => `p${String(i).padStart(3, '0')}`);
      for (let i = 0; i < names.length; i += 10)
        await Promise.all(names.slice(i, i + 10).map((q) => d.submit(q, bytes('x'), { id: `j-${q}` })));
      // One worker on a queue of the first page and one of the second.
      for (const q of ['p000', 'p102']) await d.claimMany(q, 'w-pages', 1, { leaseMs: 60_000, worker: { host: 'h', pid: 1 } });
      const all = await d.overview();
      expect(all.map((q) => q.queue)).toEqual(names);
      expect(all.map((q) => q.counts.queued + q.counts.running)).toEqual(names.map(() => 1));
      expect(all.find((q) => q.queue === 'p102')!.counts.running).toBe(1);
      expect(await d.listQueues()).toEqual(names);
      const seen = (await d.workers()).filter((w) => w.worker_id === 'w-pages');
      expect(seen).toHaveLength(1);
      expect(seen[0]).toMatchObject({ queues: ['p000', 'p102'], host: 'h', pid: 1, status: 'active' });
      expect(seen[0]!.holding.map((x) => x.id).sort()).toEqual(['j-p000', 'j-p102']);
      const text = await d.metrics();
      const families = parsePrometheusTextFormat(text);
      const jobs = families.find((f) => f.name === 'lakeshore_jobs')!.metrics.filter((m) => m.labels?.state === 'queued');
      expect(jobs.map((m) => m.labels!.queue)).toEqual(names);
      expect(text.match(/^# HELP lakeshore_jobs /gm)).toHaveLength(1);
      expect(families.find((f) => f.name === 'lakeshore_more_queues')!.metrics).toEqual([
        { labels: { namespace: d.namespace }, value: '0' },
      ]);
      // One page at a time (what a dashboard of many queues reads): 100, then the rest.
      const first = await d.overviewPage();
      expect([first.queues.map((q) => q.queue), first.next]).toEqual([names.slice(0, 100), 'p099']);
      const rest = await d.overviewPage({ after: first.next });
      expect([rest.queues.map((q) => q.queue), rest.next]).toEqual([names.slice(100), null]);
      expect(rest.queues.find((q) => q.queue === 'p102')!.counts.running).toBe(1);
      const two = await d.overviewPage({ after: 'p050', limit: 2 });
      expect([two.queues.map((q) => q.queue), two.next]).toEqual([['p051', 'p052'], 'p052']);
      expect(await d.overviewPage({ after: 'p102' })).toEqual({ queues: [], next: null });
      // Between two names: the page starts at the next one.
      expect((await d.overviewPage({ after: 'p0505', limit: 1 })).queues.map((q) => q.queue)).toEqual(['p051']);
      for (const limit of [0, 101, 1.5]) await expect(d.overviewPage({ limit })).rejects.toBeInstanceOf(BadRequestError);
      await expect(d.overviewPage({ after: 'bad\u0000name' })).rejects.toBeInstanceOf(BadRequestError);
    });

    it('metrics parse as the Prometheus text format: gauges from the rows, counters of transitions', async () => {
      for (let i = 0; i < 3; i++) await d.submit('m', bytes('x'), { id: `m${i}` });
      await d.submit('m', bytes('x'), { id: 'm-later', delayMs: 3_600_000 });
      await d.cancel('m2');
      const families = parsePrometheusTextFormat(await d.metrics());
      const family = (name: string) => families.find((f) => f.name === name)!;
      const value = (name: string, labels: Record<string, string>) =>
        Number(family(name).metrics.find((m) => Object.entries(labels).every(([k, v]) => m.labels?.[k] === v))?.value);
      expect(family('lakeshore_jobs').type).toBe('GAUGE');
      expect(family('lakeshore_transitions_total').type).toBe('COUNTER');
      expect(value('lakeshore_jobs', { queue: 'm', state: 'queued', namespace: d.namespace })).toBe(2);
      expect(value('lakeshore_jobs', { queue: 'm', state: 'delayed' })).toBe(1);
      expect(value('lakeshore_jobs', { queue: 'm', state: 'running' })).toBe(0);
      expect(value('lakeshore_transitions_total', { queue: 'm', transition: 'submitted' })).toBe(4);
      expect(value('lakeshore_transitions_total', { queue: 'm', transition: 'cancelled' })).toBe(1);
      expect(value('lakeshore_oldest_queued_seconds', { queue: 'm' })).toBeGreaterThanOrEqual(0);
      expect(value('lakeshore_counters_started_seconds', { queue: 'm' })).toBeGreaterThan(1.7e9);
    });
  });
}
