/** HttpDispatch against a real `wrangler dev`: the verbs, the error classes and the journal stream. */
import { createServer, connect, type AddressInfo } from 'node:net';
import { describe, expect, it } from 'vitest';
import { inject } from 'vitest';
import {
  BadRequestError, FencingConflictError, FrameKind, HttpDispatch, InvocationCancelledError, InvocationFailedError,
  NotFoundError, PayloadTooLargeError, TimeoutError, UnauthorizedError, encodeFrame, type JournalFrame,
} from '../../client/index.ts';
import { bytes, client, text } from './setup/client.ts';

describe('HttpDispatch verbs', () => {
  it('submits, claims, acks and answers the result as bytes', async () => {
    const d = client();
    const id = await d.submit('q', bytes('payload'), { id: 'job-1', priority: 1 });
    expect(id).toBe('job-1');
    expect(await d.count('q')).toBe(1);
    const c = await d.claim('q', 'w1');
    expect(c).toMatchObject({ id: 'job-1', queue: 'q', attempt: 1, priority: 1 });
    expect(text(c!.envelope)).toBe('payload');
    expect((await d.heartbeat('job-1', 'w1')).cancelled).toBe(false);
    await d.ack('job-1', 'w1', { result: bytes('answer') });
    expect(text(await d.result('job-1'))).toBe('answer');
    expect((await d.get('job-1'))).toMatchObject({ state: 'succeeded', attempt: 1, workerId: 'w1' });
    expect(await d.count('q', 'succeeded')).toBe(1);
  });

  it('is idempotent on a key', async () => {
    const d = client();
    expect(await d.submit('q', bytes('x'), { id: 'a', key: 'k' })).toBe('a');
    expect(await d.submit('q', bytes('x'), { id: 'b', key: 'k' })).toBe('a');
    expect(await d.count('q')).toBe(1);
  });

  it('waits in claim until work arrives', async () => {
    const d = client();
    const waiting = d.claim('q', 'w', { waitMs: 10_000 });
    await new Promise((r) => setTimeout(r, 100));
    await d.submit('q', bytes('x'), { id: 'late' });
    expect((await waiting)?.id).toBe('late');
    expect(await d.claim('q', 'w', { waitMs: 50 })).toBeNull();
  });

  it('claims many at once', async () => {
    const d = client();
    for (let i = 0; i < 4; i++) await d.submit('q', bytes('x'), { id: `j${i}` });
    expect((await d.claimMany('q', 'w', 3)).map((c) => c.id)).toEqual(['j0', 'j1', 'j2']);
  });

  it('nacks with and without retry, and cancels', async () => {
    const d = client();
    await d.submit('q', bytes('x'), { id: 'a' });
    await d.claim('q', 'w');
    await d.nack('a', 'w', { error: 'transient', retry: true });
    expect((await d.get('a'))!.state).toBe('queued');
    await d.claim('q', 'w');
    await d.nack('a', 'w', { error: { message: 'bad input', type: 'ValueError' }, retry: false });
    await expect(d.result('a')).rejects.toBeInstanceOf(InvocationFailedError);
    await expect(d.result('a')).rejects.toMatchObject({ error: { message: 'bad input', type: 'ValueError' } });
    await d.submit('q', bytes('x'), { id: 'b' });
    expect(await d.cancel('b')).toBe(true);
    expect(await d.cancel('b')).toBe(false);
    await expect(d.result('b')).rejects.toBeInstanceOf(InvocationCancelledError);
  });

  it('tells a worker its job was cancelled through the heartbeat', async () => {
    const d = client();
    await d.submit('q', bytes('x'), { id: 'a' });
    await d.claim('q', 'w');
    await d.cancel('a');
    expect(await d.heartbeat('a', 'w')).toEqual({ leaseUntil: null, cancelled: true });
  });

  it('configures a queue lease', async () => {
    const d = client();
    await d.configureQueue('q', { leaseMs: 2_000 });
    await d.submit('q', bytes('x'), { id: 'a' });
    const t0 = Date.now();
    const c = await d.claim('q', 'w');
    expect(c!.leaseUntil - t0).toBeLessThan(4_000);
  });
});

describe('HttpDispatch errors', () => {
  it('raises one class per contract error', async () => {
    const d = client();
    await expect(d.submit('q', bytes('x'), { id: '' })).rejects.toBeInstanceOf(BadRequestError);
    await expect(d.submit('q', new Uint8Array((1 << 20) + 1), { id: 'big' })).rejects.toBeInstanceOf(PayloadTooLargeError);
    await expect(d.ack('ghost', 'w')).rejects.toBeInstanceOf(NotFoundError);
    expect(await d.get('ghost')).toBeNull();
    await d.submit('q', bytes('x'), { id: 'a' });
    await expect(d.ack('a', 'w')).rejects.toBeInstanceOf(FencingConflictError);
    await expect(d.result('a', { timeoutMs: 50 })).rejects.toBeInstanceOf(TimeoutError);
    const anon = new HttpDispatch(inject('planeUrl'), { token: 'wrong', namespace: d.namespace });
    await expect(anon.count('q')).rejects.toBeInstanceOf(UnauthorizedError);
  });
});

describe('HttpDispatch journal', () => {
  it('streams frames live to a producer, then the result', async () => {
    const producer = client();
    const worker = client({ namespace: producer.namespace });
    await producer.submit('gen', bytes('{"fn":"count"}'), { id: 'g' });
    const seen: { seq: number; at: number }[] = [];
    const reading = (async () => {
      for await (const f of producer.journalRead('g', { timeoutMs: 30_000 })) seen.push({ seq: f.seq, at: Date.now() });
    })();
    const c = await worker.claim('gen', 'w1');
    for (let i = 0; i < 3; i++) {
      await worker.journalAppend(c!.id, i, { kind: FrameKind.VALUE, seq: i, body: bytes(String(i)), meta: null });
      await new Promise((r) => setTimeout(r, 150));
    }
    for (let i = 0; i < 500 && seen.length < 3; i++) await new Promise((r) => setTimeout(r, 10));
    expect(seen.map((s) => s.seq)).toEqual([0, 1, 2]); // arrived while the job still runs
    const ackAt = Date.now();
    await worker.journalAppend(c!.id, 3, encodeFrame({ kind: FrameKind.END, seq: 3, body: new Uint8Array(), meta: null }));
    await worker.ack(c!.id, 'w1', { result: bytes('3') });
    await reading;
    expect(seen.map((s) => s.seq)).toEqual([0, 1, 2, 3]);
    expect(seen[2]!.at).toBeLessThan(ackAt);
    expect(text(await producer.result('g'))).toBe('3');
  });

  it('resumes from its cursor after the connection drops, losing and repeating nothing', async () => {
    // A loopback TCP proxy in front of the plane that cuts each of the reader's first three
    // connections right after it forwarded a frame event.
    const upstream = new URL(inject('planeUrl'));
    let cuts = 0;
    const proxy = createServer((down) => {
      const up = connect(Number(upstream.port), upstream.hostname);
      down.pipe(up);
      let seen = '';
      up.on('data', (chunk: Buffer) => {
        down.write(chunk);
        seen += chunk.toString('latin1');
        if (cuts < 3 && seen.includes('event: frame')) {
          cuts++;
          up.destroy();
          down.destroy();
        }
      });
      up.on('error', () => down.destroy());
      down.on('error', () => up.destroy());
    });
    await new Promise<void>((r) => proxy.listen(0, '127.0.0.1', r));
    const port = (proxy.address() as AddressInfo).port;
    try {
      const worker = client();
      const reader = new HttpDispatch(`http://127.0.0.1:${port}`, { token: inject('planeToken'), namespace: worker.namespace });
      await worker.submit('q', bytes('x'), { id: 'r' });
      await worker.claim('q', 'w');
      const got: JournalFrame[] = [];
      const reading = (async () => {
        for await (const f of reader.journalRead('r', { timeoutMs: 30_000 })) got.push(f);
      })();
      for (let i = 0; i < 6; i++) {
        await worker.journalAppend('r', i, { kind: FrameKind.VALUE, seq: i, body: bytes(`v${i}`), meta: null });
        await new Promise((r) => setTimeout(r, 60));
      }
      await worker.journalAppend('r', 6, { kind: FrameKind.END, seq: 6, body: new Uint8Array(), meta: null });
      await reading;
      expect(cuts).toBe(3);
      expect(got.map((f) => f.seq)).toEqual([0, 1, 2, 3, 4, 5, 6]);
      expect(got.map((f) => text(f.body))).toEqual(['v0', 'v1', 'v2', 'v3', 'v4', 'v5', '']);
    } finally {
      proxy.close();
    }
  });

  it('trims, and reads after a trim fall back to the row', async () => {
    const d = client();
    await d.submit('q', bytes('x'), { id: 't' });
    await d.claim('q', 'w');
    for (let i = 0; i < 4; i++) await d.journalAppend('t', i, { kind: FrameKind.CHUNK, seq: i, body: bytes(`c${i}`), meta: null });
    await d.ack('t', 'w', { result: bytes('done') });
    expect(await d.journalTrim('t', 1)).toBe(3);
    const rest: number[] = [];
    for await (const f of d.journalRead('t')) rest.push(f.seq);
    expect(rest).toEqual([3]);
    expect(text(await d.result('t'))).toBe('done');
  });
});
