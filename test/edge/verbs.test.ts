/** Every verb over the HTTP routes, with the answers the contract documents. */
import { describe, expect, it } from 'vitest';
import { b64, call, plane, unb64 } from './setup/http.ts';
import { parkedOn, queueStub } from './setup/objects.ts';

const claimIds = async (p: ReturnType<typeof plane>, queue: string, n: number, extra: Record<string, unknown> = {}) => {
  const out: string[] = [];
  for (let i = 0; i < n; i++) out.push((await p.claim(queue, 'w', extra)).body.claimed[0]?.id);
  return out;
};

describe('claim order', () => {
  it('fifo: highest priority first, then oldest', async () => {
    const p = plane();
    for (const [id, pr] of [
      ['a', 0],
      ['b', 1],
      ['c', 0],
      ['d', 1],
      ['e', 2],
    ] as const)
      await p.submit('q', id, { priority: pr });
    expect(await claimIds(p, 'q', 5, { kind: 'fifo' })).toEqual(['e', 'b', 'd', 'a', 'c']);
  });

  it('filo: highest priority first, then newest', async () => {
    const p = plane();
    for (const [id, pr] of [
      ['a', 0],
      ['b', 1],
      ['c', 0],
      ['d', 1],
      ['e', 2],
    ] as const)
      await p.submit('q', id, { priority: pr });
    expect(await claimIds(p, 'q', 5, { kind: 'filo' })).toEqual(['e', 'd', 'b', 'c', 'a']);
  });

  it('boltzmann at T=0 degenerates to fifo', async () => {
    const p = plane();
    for (const [id, pr] of [
      ['a', 0],
      ['b', 1],
      ['c', 0],
      ['d', 1],
    ] as const)
      await p.submit('q', id, { priority: pr });
    expect(await claimIds(p, 'q', 4, { kind: 'boltzmann', temperature: 0 })).toEqual(['b', 'd', 'a', 'c']);
  });

  it('claims up to max invocations in one request', async () => {
    const p = plane();
    for (let i = 0; i < 5; i++) await p.submit('q', `j${i}`);
    const got = (await p.claim('q', 'w', { max: 3 })).body.claimed.map((c: { id: string }) => c.id);
    expect(got).toEqual(['j0', 'j1', 'j2']);
  });
});

describe('waits', () => {
  it('parks a claim until a submit arrives, and the submit wakes it', async () => {
    const p = plane();
    const waiting = p.claim('q', 'w', { wait_ms: 10_000 });
    await parkedOn(p.ns, 'q');
    const t0 = Date.now();
    await p.submit('q', 'late');
    const got = await waiting;
    expect(got.body.claimed[0].id).toBe('late');
    expect(Date.now() - t0).toBeLessThan(5_000);
  });

  it('a submit carries only the parked claims it can fill: with 20 parked, one job costs what one claim does', async () => {
    const p = plane();
    const stub = queueStub(p.ns, 'q');
    await p.claim('q', 'w0'); // the object exists and knows its queue
    const parked = Array.from({ length: 20 }, (_, i) => p.claim('q', `w${i + 1}`, { wait_ms: 10_000 }));
    await parkedOn(p.ns, 'q', 20);
    expect((await stub.stats()).waiters).toBe(20);
    const before = await stub.stats();
    await p.submit('q', 'one');
    const first = await Promise.race(parked.map((c, i) => c.then((r) => ({ i, r }))));
    expect(first.r.body.claimed.map((c: { id: string }) => c.id)).toEqual(['one']);
    const after = await stub.stats();
    expect(after.batches - before.batches).toBe(1); // the submit's batch answered the claim
    expect(after.waiters).toBe(19);
    // Two claim statements rode along (the one filled, and one that found the queue empty, so no
    // one else is woken), not twenty, each of which costs a row read.
    expect(after.read - before.read).toBeLessThanOrEqual(10);
    const more = Array.from({ length: 19 }, (_, i) => `more${i}`);
    expect(
      (await call('POST', `/v1/ns/${p.ns}/queues/q/invocations/batch`, { items: more.map((id) => ({ id, envelope: b64(id) })) })).status,
    ).toBe(200);
    const rest = (await Promise.all(parked.filter((_, i) => i !== first.i))).map((r) => r.body.claimed.map((c: { id: string }) => c.id));
    expect(rest.flat().sort()).toEqual([...more].sort());
  });

  it('answers an empty claim when its wait runs out', async () => {
    const p = plane();
    expect((await p.claim('q', 'w', { wait_ms: 30 })).body).toEqual({ claimed: [] });
  });

  it('parks a result wait until the ack lands', async () => {
    const p = plane();
    await p.submit('q', 'a');
    await p.claim('q', 'w');
    const waiting = p.result('a', 10_000);
    await parkedOn(p.ns, 'q');
    await p.ack('a', 'w', { result: b64('42') });
    const r = (await waiting).body;
    expect(r.state).toBe('succeeded');
    expect(unb64(r.result)).toBe('42');
  });

  it('says a result wait timed out, and answers failed and cancelled with their error', async () => {
    const p = plane();
    await p.submit('q', 'slow');
    expect((await p.result('slow', 20)).body).toEqual({ id: 'slow', state: 'queued', timed_out: true });
    await p.submit('q', 'bad');
    await p.claim('q', 'w');
    await p.claim('q', 'w');
    await p.nack('bad', 'w', { error: { message: 'exploded', type: 'ValueError' }, retry: false });
    expect((await p.result('bad')).body).toEqual({ id: 'bad', state: 'failed', error: { message: 'exploded', type: 'ValueError' } });
    await p.cancel('slow');
    expect((await p.result('slow')).body).toMatchObject({ state: 'cancelled', error: { message: 'cancelled' } });
  });
});

describe('nack', () => {
  it('puts the row back in queued with retry, and fails it without', async () => {
    const p = plane();
    await p.submit('q', 'a');
    await p.claim('q', 'w');
    expect((await p.nack('a', 'w', { retry: true })).body).toMatchObject({ state: 'queued' });
    expect((await p.get('a')).body).toMatchObject({ state: 'queued', attempt: 1, error: { message: 'boom' } });
    await p.claim('q', 'w');
    expect((await p.nack('a', 'w', { retry: false })).body).toMatchObject({ state: 'failed' });
    expect((await p.get('a')).body.state).toBe('failed');
  });
});

describe('batch nack and ack', () => {
  it('fences each item on its own: a stale item fails alone', async () => {
    const p = plane();
    for (const id of ['a', 'b', 'c']) await p.submit('q', id);
    await p.claim('q', 'w', { max: 3 });
    const nacks = await call('POST', `/v1/ns/${p.ns}/queues/q/nack`, {
      items: [
        { id: 'a', worker_id: 'w', error: 'again' },
        { id: 'b', worker_id: 'intruder', error: 'x' },
        { id: 'c', worker_id: 'w', error: 'bad', retry: false },
      ],
    });
    expect(nacks.body.results).toEqual([
      { ok: true, state: 'queued', absorbed: false },
      { error: { code: 'conflict', message: expect.stringMatching(/another worker/) } },
      { ok: true, state: 'failed', absorbed: false },
    ]);
    const acks = await call('POST', `/v1/ns/${p.ns}/queues/q/ack`, {
      items: [
        { id: 'b', worker_id: 'w' },
        { id: 'c', worker_id: 'w' },
      ],
    });
    expect(acks.body.results[0]).toEqual({ ok: true, absorbed: false });
    expect(acks.body.results[1].error.code).toBe('conflict');
    expect([(await p.get('a')).body.state, (await p.get('b')).body.state, (await p.get('c')).body.state]).toEqual([
      'queued',
      'succeeded',
      'failed',
    ]);
  });
});

describe('cancel', () => {
  it('cancels a queued row, so it is never claimed, and reports false once ended', async () => {
    const p = plane();
    await p.submit('q', 'a');
    expect((await p.cancel('a')).body).toEqual({ cancelled: true });
    expect((await p.claim('q', 'w')).body.claimed).toEqual([]);
    expect((await p.cancel('a')).body).toEqual({ cancelled: false });
  });
});

describe('journal', () => {
  it('assigns the next seq when none is given and pages from a since-cursor', async () => {
    const p = plane();
    await p.submit('q', 'a');
    await p.claim('q', 'w');
    for (let i = 0; i < 3; i++) expect((await p.append('a', 'w', { body: b64(`v${i}`) })).body.seq).toBe(i);
    const page = (await p.read('a', 0)).body;
    expect(page.frames.map((f: { seq: number }) => f.seq)).toEqual([1, 2]);
    expect(page).toMatchObject({ next: 2, done: false, state: 'running', trimmed_before: -1 });
  });

  it('ends the stream at a final frame, and marks each frame with the attempt that wrote it', async () => {
    const p = plane();
    await p.submit('q', 'a');
    await p.claim('q', 'w');
    await p.append('a', 'w', { kind: 2, body: b64('') });
    await p.append('a', 'w', { kind: 4, body: b64('err'), final: false }); // will retry: not final
    await p.nack('a', 'w');
    await p.claim('q', 'w');
    await p.append('a', 'w', { kind: 2, body: b64('') });
    await p.append('a', 'w', { kind: 0, body: b64('v') });
    await p.append('a', 'w', { kind: 3, body: b64('') });
    const page = (await p.read('a')).body;
    expect(page.frames.map((f: any) => [f.seq, f.kind, f.attempt, f.final])).toEqual([
      [0, 2, 1, false],
      [1, 4, 1, false],
      [2, 2, 2, false],
      [3, 0, 2, false],
      [4, 3, 2, true],
    ]);
    expect(page.done).toBe(true);
  });

  it('long-polls a JSON page with wait_ms', async () => {
    const p = plane();
    await p.submit('q', 'a');
    await p.claim('q', 'w');
    const waiting = call('GET', `/v1/ns/${p.ns}/invocations/a/journal?since=-1&wait_ms=5000`);
    await parkedOn(p.ns, 'q');
    await p.append('a', 'w', { body: b64('hi') });
    expect((await waiting).body.frames[0].seq).toBe(0);
  });
});

describe('namespaces', () => {
  it('keeps everything of one namespace invisible from another', async () => {
    const a = plane();
    const b = plane();
    await a.submit('q', 'secret');
    expect((await b.get('secret')).status).toBe(404);
    expect((await b.count('q')).body.count).toBe(0);
    expect((await b.claim('q', 'w')).body.claimed).toEqual([]);
    expect((await b.cancel('secret')).status).toBe(404);
    expect((await a.get('secret')).body.state).toBe('queued');
  });
});

describe('the overview', () => {
  it('answers only the queues named (?queue=), each once, in that order; one never used, empty', async () => {
    const p = plane();
    await p.submit('a', 'x');
    await p.submit('b', 'y');
    await p.submit('b', 'z');
    const named = await call('GET', `/v1/ns/${p.ns}/queues?queue=b&queue=never&queue=b`);
    expect(named.status).toBe(200);
    const queues = (named.body as { queues: { queue: string; counts: { queued: number } }[] }).queues;
    expect(queues.map((q) => [q.queue, q.counts.queued])).toEqual([
      ['b', 2],
      ['never', 0],
    ]);
    const all = (await call('GET', `/v1/ns/${p.ns}/queues`)).body as { queues: { queue: string }[] };
    expect(all.queues.map((q) => q.queue)).toEqual(['a', 'b']); // asking about a queue does not make one
  });

  it('answers at most 100 queues a request, with the name to ask after for the next page; /metrics and /workers too', async () => {
    const p = plane();
    const names = Array.from({ length: 103 }, (_, i) => `p${String(i).padStart(3, '0')}`);
    for (let i = 0; i < names.length; i += 10) await Promise.all(names.slice(i, i + 10).map((q) => p.submit(q, `j-${q}`)));
    await p.claim('p102', 'w-last');
    type Page = { queues: { queue: string }[]; next: string | null; storage: unknown };
    const page = async (qs: string) => (await call('GET', `/v1/ns/${p.ns}/queues${qs}`)).body as Page;
    const first = await page('');
    expect(first.queues.map((q) => q.queue)).toEqual(names.slice(0, 100));
    expect(first.next).toBe('p099');
    expect(first.storage).toBeTruthy();
    const second = await page('?after=p099');
    expect([second.queues.map((q) => q.queue), second.next]).toEqual([names.slice(100), null]);
    const small = await page('?after=p050&limit=2');
    expect([small.queues.map((q) => q.queue), small.next]).toEqual([['p051', 'p052'], 'p052']);
    // Named queues are answered whole (up to 100) and never paged.
    expect((await page('?queue=p001&queue=p102')).next).toBeNull();
    // Metrics: the same page, and a gauge that says where to go on.
    const metrics = async (qs: string) => (await call('GET', `/v1/ns/${p.ns}/metrics${qs}`)).body as string;
    const m1 = await metrics('');
    expect(m1.match(/^lakeshore_jobs\{[^}]*state="queued"/gm)).toHaveLength(100);
    expect(m1).toContain(`lakeshore_more_queues{namespace="${p.ns}",after="p099"} 1`);
    const m2 = await metrics('?after=p099');
    expect(m2.match(/^lakeshore_jobs\{[^}]*state="queued"/gm)).toHaveLength(3);
    expect(m2).toContain(`lakeshore_more_queues{namespace="${p.ns}"} 0`);
    // Workers: those of the page's queues.
    const workers = async (qs: string) =>
      (await call('GET', `/v1/ns/${p.ns}/workers${qs}`)).body as { workers: { worker_id: string }[]; next: string | null };
    const w1 = await workers('');
    expect([w1.workers.map((w) => w.worker_id), w1.next]).toEqual([[], 'p099']);
    const w2 = await workers('?after=p099');
    expect([w2.workers.map((w) => w.worker_id), w2.next]).toEqual([['w-last'], null]);
    // The names alone: up to 1,000 a page (listQueues reads them), no queue object asked.
    const names1 = (await call('GET', `/v1/ns/${p.ns}/queue-names`)).body;
    expect(names1).toEqual({ queues: names, next: null });
    const names2 = (await call('GET', `/v1/ns/${p.ns}/queue-names?after=p100&limit=1`)).body;
    expect(names2).toEqual({ queues: ['p101'], next: 'p101' });
  });
});
