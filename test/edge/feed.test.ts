/**
 * The lifecycle feed of a queue, in workerd: one record per committed transition, in commit order;
 * a reader cut again and again resumes with Last-Event-ID and loses or repeats none; a reader from
 * another instance of the object, or behind the window, is told of the gap.
 */
import { exports } from 'cloudflare:workers';
import { describe, expect, it } from 'vitest';
import type { EventSourceMessage } from 'eventsource-parser';
import { countReaches, readEvents } from './setup/sse.ts';
import { b64, call, plane } from './setup/http.ts';
import { queueStub } from './setup/objects.ts';
import { until } from '../support/wait.ts';

const feed = (ns: string, lastEventId?: string, query = '') =>
  (exports as any).default.fetch(`http://plane/v1/ns/${ns}/events?queue=q${query}`, {
    headers: { authorization: 'Bearer test-token', accept: 'text/event-stream', ...(lastEventId ? { 'last-event-id': lastEventId } : {}) },
  }) as Promise<Response>;

/** 1,000 transitions on queue q: 250 submits, 250 claims, 250 acks, then 125 submits and 125 cancels. */
async function thousandTransitions(ns: string) {
  const base = `/v1/ns/${ns}`;
  const items = Array.from({ length: 250 }, (_, i) => ({ id: `j${i}`, envelope: b64('x') }));
  expect((await call('POST', `${base}/queues/q/invocations/batch`, { items })).status).toBe(200);
  const claimed: string[] = [];
  while (claimed.length < 250)
    claimed.push(
      ...(await call('POST', `${base}/queues/q/claim`, { worker_id: 'w', max: 100 })).body.claimed.map((c: { id: string }) => c.id),
    );
  for (let i = 0; i < 250; i += 50) {
    const acks = claimed.slice(i, i + 50).map((id) => ({ id, worker_id: 'w' }));
    expect((await call('POST', `${base}/queues/q/ack`, { items: acks })).status).toBe(200);
  }
  const more = Array.from({ length: 125 }, (_, i) => ({ id: `c${i}`, envelope: b64('x') }));
  expect((await call('POST', `${base}/queues/q/invocations/batch`, { items: more })).status).toBe(200);
  for (const m of more) expect((await call('POST', `${base}/invocations/${m.id}/cancel`)).body.cancelled).toBe(true);
}

const records = (evs: EventSourceMessage[]) =>
  evs.filter((e) => e.event === 'job').map((e) => ({ eventId: e.id!, ...(JSON.parse(e.data) as { id: string; status: string }) }));

/** A batch reader's records (`?batch=1`), each with the id of the `records` event it came in. */
const batched = (evs: EventSourceMessage[]) =>
  evs
    .filter((e) => e.event === 'records')
    .flatMap((e) => (JSON.parse(e.data) as { id: string; status: string; kind: string }[]).map((r) => ({ eventId: e.id!, ...r })));

/** A `stop` for readEvents: true once the `records` events have brought `n` job records. */
function batchReaches(n: number): (events: EventSourceMessage[]) => boolean {
  let seen = 0;
  let count = 0;
  return (events) => {
    for (; seen < events.length; seen++)
      if (events[seen]!.event === 'records')
        count += (JSON.parse(events[seen]!.data) as { kind: string }[]).filter((r) => r.kind === 'job').length;
    return count >= n;
  };
}

const jobs = (recs: { kind: string; id: string; status: string }[]) =>
  recs.filter((r) => r.kind === 'job').map((r) => `${r.id} ${r.status}`);

describe('lifecycle feed', () => {
  it('tells 1,000 transitions as 1,000 records in commit order, and a reader cut 20 times gets each once', async () => {
    const p = plane();
    // Two readers, both attached before the first transition: one reads the whole feed on one
    // connection; the other is cut after every 50 records and resumes from the last id it saw.
    const whole = await feed(p.ns);
    const first = await feed(p.ns);
    await until(async () => (await queueStub(p.ns, 'q').stats()).feed_readers >= 2, 'the readers to be attached');
    const all = readEvents(whole, countReaches(1000));
    const cut = (async () => {
      const got: ReturnType<typeof records> = [];
      let res = first;
      for (let i = 0; i < 20; i++) {
        const recs = records(await readEvents(res, countReaches(50)));
        got.push(...recs);
        if (i < 19) res = await feed(p.ns, recs.at(-1)!.eventId);
      }
      return got;
    })();
    await thousandTransitions(p.ns);
    const recs = records(await all);
    expect(recs).toHaveLength(1000);
    const seqs = recs.map((r) => Number(r.eventId.split('.')[1]));
    expect(seqs).toEqual([...seqs].sort((a, b) => a - b));
    // Each job's records in the order of its life.
    const jobs = new Map<string, string[]>();
    for (const e of (await all).filter((x) => x.event === 'job')) {
      const rec = JSON.parse(e.data) as { id: string; status: string; queue: string };
      expect(rec.queue).toBe('q');
      jobs.set(rec.id, [...(jobs.get(rec.id) ?? []), rec.status]);
    }
    for (let i = 0; i < 250; i++) expect(jobs.get(`j${i}`), `j${i}`).toEqual(['queued', 'running', 'succeeded']);
    for (let i = 0; i < 125; i++) expect(jobs.get(`c${i}`), `c${i}`).toEqual(['queued', 'cancelled']);
    const cutRecs = await cut;
    expect(cutRecs.map((r) => r.eventId)).toEqual(recs.map((r) => r.eventId));
  }, 60_000);

  it('tells a reader from before a restart, or behind the window, that it missed records (gap)', async () => {
    const p = plane();
    await p.submit('q', 'a');
    const fresh = await readEvents(await feed(p.ns, 'zzzzzz.5'), (evs) => evs.some((e) => e.event === 'gap'));
    expect(JSON.parse(fresh.find((e) => e.event === 'gap')!.data)).toMatchObject({ reason: 'restarted' });
    // 10,200 records (3,400 jobs submitted, claimed, acked) with a reader attached: past the 10,000 kept.
    const live = readEvents(await feed(p.ns), countReaches(10_200));
    await until(async () => (await queueStub(p.ns, 'q').stats()).feed_readers >= 1, 'the reader to be attached');
    const base = `/v1/ns/${p.ns}`;
    for (let k = 0; k < 4; k++) {
      const items = Array.from({ length: k < 3 ? 1000 : 400 }, (_, i) => ({ id: `n${k}-${i}`, envelope: b64('x') }));
      expect((await call('POST', `${base}/queues/q/invocations/batch`, { items })).status).toBe(200);
    }
    let claimed: string[] = [];
    while (claimed.length < 3400)
      claimed = claimed.concat(
        (await call('POST', `${base}/queues/q/claim`, { worker_id: 'w', max: 1000 })).body.claimed.map((c: { id: string }) => c.id),
      );
    for (let i = 0; i < claimed.length; i += 1000) {
      expect(
        (await call('POST', `${base}/queues/q/ack`, { items: claimed.slice(i, i + 1000).map((id) => ({ id, worker_id: 'w' })) })).status,
      ).toBe(200);
    }
    const recs = records(await live);
    const instance = recs[0]!.eventId.split('.')[0]!;
    const behind = await readEvents(await feed(p.ns, `${instance}.1`), (evs) => evs.some((e) => e.event === 'gap'));
    expect(JSON.parse(behind.find((e) => e.event === 'gap')!.data)).toMatchObject({ reason: 'behind' });
    // Within the window: every record after the id, the first one next.
    const within = await readEvents(await feed(p.ns, recs[500]!.eventId), countReaches(10));
    expect(within.some((e) => e.event === 'gap')).toBe(false);
    expect(records(within).map((r) => r.eventId)).toEqual(recs.slice(501, 511).map((r) => r.eventId));
  }, 60_000);
});

describe('lifecycle feed in batches (?batch=1)', () => {
  it("brings the same records in the same order, each event id its last record's, and a cut reader resumes losing or repeating none", async () => {
    const p = plane();
    const each = await feed(p.ns);
    const whole = await feed(p.ns, undefined, '&batch=1');
    const first = await feed(p.ns, undefined, '&batch=1');
    const jobsOnly = await feed(p.ns, undefined, '&batch=1&kinds=job');
    await until(async () => (await queueStub(p.ns, 'q').stats()).feed_readers >= 4, 'the readers to be attached');
    const one = readEvents(each, countReaches(1000));
    const all = readEvents(whole, batchReaches(1000));
    const onlyJobs = readEvents(jobsOnly, batchReaches(1000));
    // Cut after every event that brings another 50 job records, resumed from the last id seen.
    const cut = (async () => {
      const got: ReturnType<typeof batched> = [];
      let res = first;
      while (jobs(got).length < 1000) {
        const recs = batched(await readEvents(res, batchReaches(Math.min(50, 1000 - jobs(got).length))));
        got.push(...recs);
        if (jobs(got).length < 1000) res = await feed(p.ns, recs.at(-1)!.eventId, '&batch=1');
      }
      return got;
    })();
    await thousandTransitions(p.ns);
    // Every record (jobs' and the worker's) as a reader of one event a record has them, with its id.
    const singly = (await one)
      .filter((e) => e.event === 'job' || e.event === 'worker')
      .map((e) => ({ eventId: e.id!, ...(JSON.parse(e.data) as { kind: string; id: string; status: string }) }));
    const inBatches = batched(await all);
    expect(inBatches.length).toBeGreaterThanOrEqual(singly.length);
    expect(inBatches.slice(0, singly.length).map(({ eventId: _, ...r }) => r)).toEqual(singly.map(({ eventId: _, ...r }) => r));
    // A batch's id is its last record's: the id a reader of one event a record saw for it.
    const events = (await all).filter((e) => e.event === 'records');
    expect(events.length).toBeGreaterThan(1);
    let at = 0;
    for (const e of events) {
      at += (JSON.parse(e.data) as unknown[]).length;
      if (at <= singly.length) expect(e.id).toBe(singly[at - 1]!.eventId);
    }
    expect(jobs(batched(await onlyJobs))).toEqual(jobs(singly));
    expect(batched(await onlyJobs).every((r) => r.kind === 'job')).toBe(true);
    expect(jobs(await cut)).toEqual(jobs(singly));
    // A reader that resumes from a record's id is owed the rest of the window: in batches, the next first.
    const from = singly.findIndex((r) => r.kind === 'job' && r.id === 'j200' && r.status === 'running');
    const owed = jobs(singly.slice(from + 1));
    const within = batched(await readEvents(await feed(p.ns, singly[from]!.eventId, '&batch=1'), batchReaches(owed.length)));
    expect(jobs(within)).toEqual(owed);
  }, 60_000);

  it('refuses a batch that is not 1 or 0, changing nothing', async () => {
    const p = plane();
    const res = await feed(p.ns, undefined, '&batch=yes');
    expect(res.status).toBe(400);
    expect(((await res.json()) as { error: { code: string; message: string } }).error).toMatchObject({
      code: 'bad_request',
      message: expect.stringContaining('batch must be 1'),
    });
    expect((await queueStub(p.ns, 'q').stats()).feed_readers).toBe(0);
  });
});

describe('traceIdOf: the trace id a record carries, read from the envelope bytes', () => {
  const id = '4bf92f3577b34da6a3ce929d0e0e4736';
  const tp = `00-${id}-00f067aa0ba902b7-01`;
  const bytes = (s: string) => new TextEncoder().encode(s);
  it('finds the compact form, the spaced form, and the first valid one after a decoy', async () => {
    const { traceIdOf } = await import('../../src/core/feed.ts');
    expect(traceIdOf(bytes(JSON.stringify({ v: 1, fn: 'f', args: [], traceparent: tp })))).toBe(id);
    expect(traceIdOf(bytes(`{"fn": "f", "traceparent" :\n\t "${tp}"}`))).toBe(id);
    // "traceparent" as a value, and as a key of a nested null, come first: neither is a trace
    expect(traceIdOf(bytes(`{"args": ["traceparent", {"traceparent": null}], "traceparent": "${tp}"}`))).toBe(id);
    expect(traceIdOf(bytes(`{"a": "\u00e9\u00e9", "traceparent":"${tp}"}`))).toBe(id);
  });
  it('finds none where the value is null, malformed, cut short or of another version', async () => {
    const { traceIdOf } = await import('../../src/core/feed.ts');
    expect(traceIdOf(bytes(JSON.stringify({ v: 1, fn: 'f', args: ['x'], traceparent: null })))).toBeNull();
    expect(traceIdOf(bytes(`{"traceparent": "${tp.toUpperCase()}"}`))).toBeNull();
    expect(traceIdOf(bytes(`{"traceparent": "${tp.replace('-01', '-1')}"}`))).toBeNull();
    expect(traceIdOf(bytes(`{"traceparent": "01-${id}-00f067aa0ba902b7-01"}`))).toBeNull();
    expect(traceIdOf(bytes(`{"traceparent": "${tp.slice(0, 55)}`))).toBeNull();
    expect(traceIdOf(bytes(`{"traceparent"`))).toBeNull();
    expect(traceIdOf(new Uint8Array())).toBeNull();
  });
});
