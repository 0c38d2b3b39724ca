/** Races the contract must win: retried writes, lost leases, dropped stream readers. */
import { describe, expect, it } from 'vitest';
import { b64, call, plane, TOKEN, unb64 } from './setup/http.ts';
import { exports } from 'cloudflare:workers';
import { readEvents } from './setup/sse.ts';
import { frameCount, parkedOn } from './setup/objects.ts';

const sse = (ns: string, id: string, lastEventId?: string) =>
  (exports as any).default.fetch(`http://plane/v1/ns/${ns}/invocations/${id}/journal`, {
    headers: { authorization: `Bearer ${TOKEN}`, accept: 'text/event-stream', ...(lastEventId ? { 'last-event-id': lastEventId } : {}) },
  }) as Promise<Response>;

describe('races', () => {
  it('absorbs a retried append instead of duplicating the frame, also when the retry races the first try', async () => {
    const p = plane();
    await p.submit('q', 'a');
    await p.claim('q', 'w');
    const first = await p.append('a', 'w', { seq: 0, body: b64('once') });
    const retry = await p.append('a', 'w', { seq: 0, body: b64('once') });
    expect(first.body).toMatchObject({ seq: 0, absorbed: false });
    expect(retry.status).toBe(200);
    expect(retry.body).toMatchObject({ seq: 0, absorbed: true });
    // Two tries of one append in flight at once, ten times over: one lands, the other is absorbed.
    for (let s = 1; s <= 10; s++) {
      const both = await Promise.all([
        p.append('a', 'w', { seq: s, body: b64(`f${s}`) }),
        p.append('a', 'w', { seq: s, body: b64(`f${s}`) }),
      ]);
      expect(both.map((r) => r.status)).toEqual([200, 200]);
      expect(both.map((r) => r.body.absorbed).sort()).toEqual([false, true]);
    }
    expect(await frameCount(p.ns, 'a')).toBe(11);
  });

  it('absorbs a retried ack and a retried keyed submit', async () => {
    const p = plane();
    await p.submit('q', 'a', { key: 'k' });
    await p.claim('q', 'w');
    expect((await p.ack('a', 'w', { result: b64('r') })).body.absorbed).toBe(false);
    expect((await p.ack('a', 'w', { result: b64('r') })).body.absorbed).toBe(true);
    expect((await p.submit('q', 'a', { key: 'k' })).body).toEqual({ id: 'a', created: false });
  });

  it('resumes an SSE reader cut mid-stream with Last-Event-ID, delivering every frame exactly once', async () => {
    const p = plane();
    await p.submit('q', 'a');
    await p.claim('q', 'w');
    for (let s = 0; s < 3; s++) await p.append('a', 'w', { seq: s, body: b64(`f${s}`) });
    // The first reader takes two frames, then its connection drops.
    const firstPart = await readEvents(await sse(p.ns, 'a'), (ev) => ev.length >= 2);
    expect(firstPart.map((e) => e.id)).toEqual(['0', '1']);
    // More frames land while nobody is reading; then the job ends.
    for (let s = 3; s < 6; s++) await p.append('a', 'w', { seq: s, body: b64(`f${s}`) });
    const resumed = await sse(p.ns, 'a', firstPart.at(-1)!.id);
    const later = p.append('a', 'w', { seq: 6, body: b64('f6'), kind: 3 }).then(() => p.ack('a', 'w', { result: b64('ok') }));
    const rest = await readEvents(resumed, (ev) => ev.some((e) => e.event === 'end'));
    await later;
    const seqs = [...firstPart, ...rest].filter((e) => e.event === 'frame').map((e) => Number(e.id));
    expect(seqs).toEqual([0, 1, 2, 3, 4, 5, 6]);
    const bodies = [...firstPart, ...rest].filter((e) => e.event === 'frame').map((e) => unb64(JSON.parse(e.data).body));
    expect(bodies).toEqual(['f0', 'f1', 'f2', 'f3', 'f4', 'f5', 'f6']);
  });

  it('wakes a parked SSE reader with a frame appended after it connected', async () => {
    const p = plane();
    await p.submit('q', 'a');
    await p.claim('q', 'w');
    const res = await sse(p.ns, 'a');
    const events = readEvents(res, (ev) => ev.length >= 1);
    await parkedOn(p.ns, 'q'); // the stream waits for a frame
    await p.append('a', 'w', { seq: 0, body: b64('live') });
    const got = await events;
    expect(got[0]).toMatchObject({ id: '0', event: 'frame' });
  });

  it('answers a journal stream of an unknown invocation with a plain 404', async () => {
    const p = plane();
    const res = await sse(p.ns, 'nope');
    expect(res.status).toBe(404);
    expect(((await res.json()) as any).error.code).toBe('not_found');
    expect((await call('GET', `/v1/ns/${p.ns}/invocations/nope/journal`)).status).toBe(404);
  });
});
