/**
 * The namespace-wide lifecycle feed, in workerd: one stream with every queue's records, each
 * queue's in commit order; a reader cut again and again resumes every queue with Last-Event-ID
 * and loses or repeats none; a queue object whose stream ends is followed again from its position;
 * a queue that starts while the stream is open joins it; `kinds` keeps one kind of record; a
 * stream ends itself before its request's subrequests are spent, and its reader resumes.
 */
import { env, exports } from 'cloudflare:workers';
import { runInDurableObject } from 'cloudflare:test';
import { describe, expect, it } from 'vitest';
import type { EventSourceMessage } from 'eventsource-parser';
import { countReaches, readEvents } from './setup/sse.ts';
import { b64, call, plane } from './setup/http.ts';
import { queueStub } from './setup/objects.ts';
import { until } from '../support/wait.ts';

const feed = (ns: string, opts: { last?: string; query?: string } = {}) =>
  (exports as any).default.fetch(`http://plane/v1/ns/${ns}/events${opts.query ?? ''}`, {
    headers: { authorization: 'Bearer test-token', accept: 'text/event-stream', ...(opts.last ? { 'last-event-id': opts.last } : {}) },
  }) as Promise<Response>;

type Rec = { eventId: string; id: string; queue: string; status: string };
const records = (evs: EventSourceMessage[]): Rec[] =>
  evs
    .filter((e) => e.event === 'job')
    .map((e) => ({ eventId: e.id!, ...(JSON.parse(e.data) as { id: string; queue: string; status: string }) }));
const byQueue = (recs: Rec[], q: string) => recs.filter((r) => r.queue === q).map((r) => `${r.id}:${r.status}`);

/** Every one of the `n` jobs `work` ran on queue `q` has its life in order: queued, running, succeeded. */
function expectLives(recs: Rec[], q: string, n: number) {
  for (let i = 0; i < n; i++)
    expect(byQueue(recs, q).filter((r) => r.startsWith(`j-${q}-${i}:`))).toEqual([
      `j-${q}-${i}:queued`,
      `j-${q}-${i}:running`,
      `j-${q}-${i}:succeeded`,
    ]);
}

/** Submits, claims and acks `n` jobs on each of `queues`, in rounds that alternate between them. */
async function work(ns: string, queues: string[], n: number, tag: string) {
  const base = `/v1/ns/${ns}`;
  for (let i = 0; i < n; i += 25) {
    for (const q of queues) {
      const items = Array.from({ length: Math.min(25, n - i) }, (_, k) => ({ id: `${tag}-${q}-${i + k}`, envelope: b64('x') }));
      expect((await call('POST', `${base}/queues/${q}/invocations/batch`, { items })).status).toBe(200);
      const got = (await call('POST', `${base}/queues/${q}/claim`, { worker_id: 'w', max: 25 })).body.claimed as { id: string }[];
      expect((await call('POST', `${base}/queues/${q}/ack`, { items: got.map((c) => ({ id: c.id, worker_id: 'w' })) })).status).toBe(200);
    }
  }
}

const readers = async (ns: string, q: string) => (await queueStub(ns, q).stats()).feed_readers;

/** The namespace's feed, opened while the plane's STREAM_SUBREQUESTS is `bound` (read once, at the start). */
async function feedUnder(bound: string, ns: string): Promise<Response> {
  const vars = env as unknown as Record<string, string | undefined>;
  const saved = vars.STREAM_SUBREQUESTS;
  vars.STREAM_SUBREQUESTS = bound;
  try {
    return await feed(ns);
  } finally {
    vars.STREAM_SUBREQUESTS = saved;
  }
}

/** A refused feed's 400 message. */
async function refusal(res: Response): Promise<string> {
  expect(res.status).toBe(400);
  return ((await res.json()) as { error: { message: string } }).error.message;
}

/** Every event of a stream that ends by itself, or null if it is still open after 20 s: bounded, not waited on forever. */
async function untilEnded(res: Response): Promise<EventSourceMessage[] | null> {
  let timer: ReturnType<typeof setTimeout> | null = null;
  const ended = await Promise.race([readEvents(res, () => false), new Promise<null>((r) => (timer = setTimeout(() => r(null), 20_000)))]);
  clearTimeout(timer);
  return ended;
}

describe('namespace-wide lifecycle feed', () => {
  it("merges every queue's records, each queue in commit order, and a reader cut 10 times resumes every queue once", async () => {
    const p = plane();
    // Two queues that exist before the readers come (a job each, cancelled: nothing left to claim).
    for (const q of ['a', 'b']) {
      await p.submit(q, `${q}0`);
      await p.cancel(`${q}0`);
    }
    const whole = await feed(p.ns);
    const first = await feed(p.ns);
    await until(async () => (await readers(p.ns, 'a')) >= 2 && (await readers(p.ns, 'b')) >= 2, 'both readers on both queues');
    const total = 2 * 3 * 100;
    const all = readEvents(whole, countReaches(total));
    const cut = (async () => {
      const got: Rec[] = [];
      let res = first;
      for (let i = 0; i < 10; i++) {
        const recs = records(await readEvents(res, countReaches(total / 10)));
        got.push(...recs);
        if (i < 9) res = await feed(p.ns, { last: recs.at(-1)!.eventId });
      }
      return got;
    })();
    await work(p.ns, ['a', 'b'], 100, 'j');
    const recs = records(await all);
    expect(recs).toHaveLength(total);
    for (const q of ['a', 'b']) {
      const want = Array.from({ length: 100 }, (_, i) => [`j-${q}-${i}:queued`]).flat();
      expect(byQueue(recs, q).filter((r) => r.endsWith(':queued'))).toEqual(want);
      expectLives(recs, q, 100);
    }
    // An id holds the reader's place in each queue.
    expect(recs.at(-1)!.eventId).toMatch(/^(a|b)=[a-z0-9]+\.\d+,(a|b)=[a-z0-9]+\.\d+$/);
    const cutRecs = await cut;
    for (const q of ['a', 'b']) expect(byQueue(cutRecs, q)).toEqual(byQueue(recs, q));
    expect(cutRecs).toHaveLength(total);
  }, 60_000);

  it("passes each queue's batches through whole with ?batch=1: the same records, and a cut reader resumes every queue once", async () => {
    const p = plane();
    for (const q of ['a', 'b']) {
      await p.submit(q, `${q}0`);
      await p.cancel(`${q}0`);
    }
    const total = 2 * 3 * 100;
    /** Job records of `records` events, each with its event's id, until `n` have come. */
    const batchRecords = (evs: EventSourceMessage[]): Rec[] =>
      evs
        .filter((e) => e.event === 'records')
        .flatMap((e) =>
          (JSON.parse(e.data) as (Rec & { kind: string })[]).filter((r) => r.kind === 'job').map((r) => ({ ...r, eventId: e.id! })),
        );
    const reaches = (n: number) => (evs: EventSourceMessage[]) => batchRecords(evs).length >= n;
    const whole = await feed(p.ns, { query: '?batch=1' });
    const first = await feed(p.ns, { query: '?batch=1' });
    await until(async () => (await readers(p.ns, 'a')) >= 2 && (await readers(p.ns, 'b')) >= 2, 'both readers on both queues');
    const all = readEvents(whole, reaches(total));
    const cut = (async () => {
      const got: Rec[] = [];
      let res = first;
      while (got.length < total) {
        const recs = batchRecords(await readEvents(res, reaches(Math.min(total / 5, total - got.length))));
        got.push(...recs);
        if (got.length < total) res = await feed(p.ns, { last: recs.at(-1)!.eventId, query: '?batch=1' });
      }
      return got;
    })();
    await work(p.ns, ['a', 'b'], 100, 'j');
    const recs = batchRecords(await all);
    expect(recs).toHaveLength(total);
    for (const q of ['a', 'b']) expectLives(recs, q, 100);
    expect(recs.at(-1)!.eventId).toMatch(/^(a|b)=[a-z0-9]+\.\d+,(a|b)=[a-z0-9]+\.\d+$/);
    const cutRecs = await cut;
    for (const q of ['a', 'b']) expect(byQueue(cutRecs, q)).toEqual(byQueue(recs, q));
  }, 60_000);

  it('follows a queue object again from its position when its stream ends, and joins a queue that starts', async () => {
    const p = plane();
    await p.submit('a', 'a0');
    await p.cancel('a0');
    const res = await feed(p.ns);
    await until(async () => (await readers(p.ns, 'a')) >= 1, 'the reader on a');
    const seen = readEvents(res, (evs) => records(evs).some((r) => r.id === 'c-probe-done'));
    await work(p.ns, ['a'], 25, 'before');
    // The object ends its streams (as a restart or a move would): the Worker reconnects from its position.
    await runInDurableObject(queueStub(p.ns, 'a'), (o) =>
      (o as unknown as { streams: { feed: { closeAll(): void } } }).streams.feed.closeAll(),
    );
    await work(p.ns, ['a'], 25, 'after');
    // A queue that starts now: the stream looks for new queues every 2 s, and follows it from then on.
    await p.submit('c', 'c-first');
    await until(async () => (await readers(p.ns, 'c')) >= 1, 'the stream to follow c', 10_000);
    await p.submit('c', 'c-probe-done');
    const evs = await seen;
    const recs = records(evs);
    const lives = byQueue(recs, 'a');
    expect(lives).toHaveLength(150);
    expect(new Set(lives).size).toBe(150);
    expect(evs.filter((e) => e.event === 'gap').map((e) => JSON.parse(e.data))).toContainEqual({ reason: 'joined', queue: 'c' });
    expect(byQueue(recs, 'c').at(-1)).toBe('c-probe-done:queued');
  }, 60_000);

  it('keeps one kind of record with ?kinds=, refuses an unknown kind, and a Last-Event-ID it did not give out', async () => {
    const p = plane();
    await p.submit('w', 'x');
    const res = await feed(p.ns, { query: '?kinds=worker' });
    await until(async () => (await readers(p.ns, 'w')) >= 1, 'the reader');
    const got = readEvents(res, (evs) => evs.some((e) => e.event === 'worker'));
    await p.submit('w', 'y');
    await p.claim('w', 'gpu-1', { worker: { queues: ['w'], host: 'h' } });
    const evs = await got;
    expect(evs.filter((e) => e.event === 'job')).toEqual([]);
    expect(JSON.parse(evs.find((e) => e.event === 'worker')!.data)).toMatchObject({
      kind: 'worker',
      worker_id: 'gpu-1',
      status: 'started',
    });
    for (const [query, last] of [
      ['?kinds=jobs', ''],
      ['', 'a=b'],
      ['', 'no-equals'],
      ['?queue=', ''],
    ]) {
      const r = await feed(p.ns, { query, last });
      expect(r.status, `${query} ${last}`).toBe(400);
      expect(((await r.json()) as { error: { code: string } }).error.code).toBe('bad_request');
    }
  }, 30_000);

  it("ends itself before its request's subrequests are spent, and its reader resumes every queue once", async () => {
    const p = plane();
    for (const q of ['a', 'b']) {
      await p.submit(q, `${q}0`);
      await p.cancel(`${q}0`);
    }
    // 4 kept back, 2 for the start, one for each queue's stream: one more list (2) and it is spent.
    const first = await feedUnder('10', p.ns);
    // Too few to follow both queues: refused at once, saying why.
    expect(await refusal(await feedUnder('7', p.ns))).toMatch(/follows at most 1 under this plane's STREAM_SUBREQUESTS \(7\)/);
    await until(async () => (await readers(p.ns, 'a')) >= 1 && (await readers(p.ns, 'b')) >= 1, 'the reader on both queues');
    await work(p.ns, ['a', 'b'], 25, 'j');
    // The stream ends by itself: its next list would pass the budget.
    const ended = await untilEnded(first);
    expect(ended, 'the stream ended by itself').not.toBeNull();
    const before = records(ended!);
    expect(before).toHaveLength(2 * 3 * 25);
    // Its reader resumes from its last id: what came after is read once, nothing before again.
    const again = await feed(p.ns, { last: before.at(-1)!.eventId });
    const after = readEvents(again, countReaches(2 * 3 * 25));
    await work(p.ns, ['a', 'b'], 25, 'k');
    const rest = records(await after);
    for (const q of ['a', 'b']) {
      expect(byQueue(before, q).every((r) => r.startsWith(`j-${q}-`))).toBe(true);
      expect(byQueue(rest, q)).toHaveLength(3 * 25);
      expect(byQueue(rest, q).every((r) => r.startsWith(`k-${q}-`))).toBe(true);
      expectLives(before, q, 25);
    }
  }, 60_000);

  it('tells its reader and ends when its namespace grows past the queues one stream follows; the reconnect is refused', async () => {
    const p = plane();
    for (const q of ['a', 'b']) await p.submit(q, `${q}0`);
    // 4 kept back and 2 for the start: one stream follows at most 24 queues.
    const stream = await feedUnder('30', p.ns);
    expect(stream.status).toBe(200);
    await until(async () => (await readers(p.ns, 'a')) >= 1 && (await readers(p.ns, 'b')) >= 1, 'the reader on both queues');
    // 23 queues start: 25 in all, one more than the stream may follow.
    for (let i = 0; i < 23; i++) await p.submit(`n${i}`, `n${i}-0`);
    const ended = await untilEnded(stream);
    expect(ended, 'the stream ended by itself').not.toBeNull();
    const gaps = ended!.filter((e) => e.event === 'gap').map((e) => JSON.parse(e.data));
    expect(gaps).toContainEqual({ reason: 'too_many_queues', most: 24 });
    expect(await refusal(await feedUnder('30', p.ns))).toMatch(/has more than 24 queues/);
  }, 60_000);
});
