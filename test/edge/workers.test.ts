/**
 * Workers: who a worker is rides its claims; the plane lists each worker once across its queues,
 * with what it holds; the feed tells started, stopped and lost.
 */
import { exports } from 'cloudflare:workers';
import { describe, expect, it } from 'vitest';
import type { EventSourceMessage } from 'eventsource-parser';
import { sseEvents } from '../../client/http/sse.ts';
import { Feed, type FeedRecord } from '../../src/core/feed.ts';
import { LOST_MS, WorkerBook } from '../../src/core/workers.ts';
import { call, plane } from './setup/http.ts';
import { queueStub } from './setup/objects.ts';
import { until } from '../support/wait.ts';

const info = { queues: ['a', 'b'], host: 'gpu-box-7', pid: 4242, version: '0.1.0', concurrency: 4 };

describe('workers', () => {
  it('lists a worker once across its queues, with what it said, when last heard, and the jobs it holds', async () => {
    const p = plane();
    await p.submit('a', 'ja');
    await p.submit('b', 'jb');
    expect((await p.claim('a', 'w1', { worker: info })).body.claimed).toHaveLength(1);
    expect((await p.claim('b', 'w1')).body.claimed).toHaveLength(1); // heard on b too, without its card
    await p.claim('a', 'w2', { worker: { host: 'cpu-1' } });
    const { workers } = (await call('GET', `/v1/ns/${p.ns}/workers`)).body;
    expect(workers.map((w: { worker_id: string }) => w.worker_id).sort()).toEqual(['w1', 'w2']);
    const w1 = workers.find((w: { worker_id: string }) => w.worker_id === 'w1');
    expect(w1).toMatchObject({ status: 'active', queues: ['a', 'b'], host: 'gpu-box-7', pid: 4242, version: '0.1.0', concurrency: 4 });
    expect(w1.holding.map((h: { id: string }) => h.id).sort()).toEqual(['ja', 'jb']);
    expect(Date.now() - w1.last_seen).toBeLessThan(60_000);
    // It stops, saying so.
    expect((await call('POST', `/v1/ns/${p.ns}/queues/a/workers/w1/stop`)).body).toEqual({ stopped: true });
    const after = (await call('GET', `/v1/ns/${p.ns}/workers`)).body.workers.find((w: { worker_id: string }) => w.worker_id === 'w1');
    expect(after.queues).toEqual(['a', 'b']);
    // A bad worker card is refused whole.
    expect((await p.claim('a', 'w3', { worker: { pid: 'x' } })).status).toBe(400);
  });

  it('tells the feed when a worker starts and stops', async () => {
    const p = plane();
    await p.submit('q', 'j');
    const res: Response = await (exports as any).default.fetch(`http://plane/v1/ns/${p.ns}/events?queue=q&kinds=job,worker`, {
      headers: { authorization: 'Bearer test-token', accept: 'text/event-stream' },
    });
    await until(async () => (await queueStub(p.ns, 'q').stats()).feed_readers >= 1, 'the reader');
    const got: EventSourceMessage[] = [];
    const reading = (async () => {
      for await (const ev of sseEvents(res.body!)) {
        got.push(ev);
        if (ev.event === 'worker' && JSON.parse(ev.data).status === 'stopped') return;
      }
    })();
    await p.claim('q', 'w9', { worker: info });
    await call('POST', `/v1/ns/${p.ns}/queues/q/workers/w9/stop`);
    await reading;
    const workerRecs = got.filter((e) => e.event === 'worker').map((e) => JSON.parse(e.data));
    expect(workerRecs.map((r) => `${r.worker_id}:${r.status}`)).toEqual(['w9:started', 'w9:stopped']);
    expect(got.filter((e) => e.event === 'job').map((e) => JSON.parse(e.data).status)).toEqual(['running']);
  });

  it('marks a worker silent past two leases lost, once, and a word from it makes it active again', () => {
    const feed = new Feed(() => 0);
    const told: FeedRecord[] = [];
    feed.on((_ns, rs) => told.push(...rs));
    const book = new WorkerBook(feed, 'ns', 'q');
    book.heard('w', { host: 'h' }, 1_000);
    expect(book.list(1_000 + LOST_MS)[0]!.status).toBe('active');
    expect(book.list(1_001 + LOST_MS)[0]!.status).toBe('lost');
    expect(book.list(2_000 + LOST_MS)[0]!.status).toBe('lost');
    book.heard('w', null, 3_000 + LOST_MS);
    expect(book.list(3_000 + LOST_MS)[0]).toMatchObject({ status: 'active', info: { host: 'h' } });
    expect(told.map((r) => (r.kind === 'worker' && 'status' in r ? r.status : r.kind))).toEqual(['started', 'lost', 'started']);
  });
});
