/**
 * One conformance suite for every plane. Each test states a rule of the contract; it runs
 * unchanged against every plane (see planes.ts), so the planes cannot drift apart.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  BadRequestError,
  FencingConflictError,
  FrameKind,
  InvocationCancelledError,
  InvocationFailedError,
  NotFoundError,
  PayloadTooLargeError,
  TimeoutError,
  encodeFrame,
  type DispatchPlane,
  type JournalFrame,
} from '../../client/local/index.ts';
import { ackAndClaim } from './ack-and-claim.ts';
import { claimKinds } from './claim-kinds.ts';
import { attempts } from './attempts.ts';
import { journalRules } from './journal-rules.ts';
import { largeValues } from './large.ts';
import { scheduling } from './scheduling.ts';
import { observing, retention, views } from './views.ts';
import type { PlaneFactory, PlaneHandle, StoragePlaneFactory } from './planes.ts';
import { storageBudget } from './storage.ts';
import { pushDelivery } from './push.ts';
import { until } from '../support/wait.ts';

const bytes = (s: string) => new TextEncoder().encode(s);
const text = (b: Uint8Array | null) => (b === null ? null : new TextDecoder().decode(b));
const frame = (kind: number, body: string, meta: Record<string, unknown> | null = null) => ({
  kind: kind as 0,
  seq: 0,
  body: bytes(body),
  meta,
});

async function drain(it: AsyncIterable<JournalFrame>): Promise<JournalFrame[]> {
  const out: JournalFrame[] = [];
  for await (const f of it) out.push(f);
  return out;
}

/**
 * `lacks`: parts of the contract a plane does not have yet, by name (a Python local plane's list is
 * in python-plane.ts); those tests are skipped on it, visibly, and every other one runs.
 * `statClaims`: the claims a statistical test makes on this plane (claim-kinds.ts; default 2,000).
 * `storagePlane`: a plane of its own with a small storage budget (storage.ts); every target has one.
 */
export function conformance(
  planeName: string,
  makePlane: PlaneFactory,
  {
    lacks = new Set<string>(),
    statClaims,
    storagePlane,
  }: { lacks?: ReadonlySet<string>; statClaims?: number; storagePlane: StoragePlaneFactory },
) {
  const part = (name: string) => (lacks.has(name) ? describe.skip : describe);
  const unless = (name: string) => it.skipIf(lacks.has(name));
  describe(`conformance: ${planeName}`, () => {
    let h: PlaneHandle;
    let d: DispatchPlane;
    /** Resolves once `n` calls are parked on queue q's plane: what ordering a wait before its wake needs. */
    const parked = (n = 1) => until(async () => (await h.parked('q')) >= n, `${n} parked call(s)`);
    beforeEach(async () => {
      h = await makePlane();
      d = h.plane;
    });
    afterEach(async () => {
      await h.dispose();
    });

    describe('verbs', () => {
      it('submit then get answers the row as submitted', async () => {
        await d.submit('q', bytes('env'), { id: 'a', key: 'k', priority: 2.5, parent: 'p' });
        expect(await d.get('a')).toMatchObject({
          id: 'a',
          namespace: d.namespace,
          queue: 'q',
          key: 'k',
          priority: 2.5,
          parent: 'p',
          state: 'queued',
          attempt: 0,
          workerId: null,
          leaseUntil: null,
          result: null,
          error: null,
          startedAt: null,
          finishedAt: null,
        });
        expect(text((await d.get('a'))!.envelope)).toBe('env');
        expect(await d.get('missing')).toBeNull();
      });

      it('claim hands over id, envelope, attempt, queue and lease; ack stores the result', async () => {
        await d.submit('q', bytes('env'), { id: 'a' });
        const c = await d.claim('q', 'w');
        expect(c).toMatchObject({ id: 'a', queue: 'q', attempt: 1, priority: 0 });
        expect(text(c!.envelope)).toBe('env');
        expect(c!.leaseUntil).toBeGreaterThan(Date.now());
        expect(await d.claim('q', 'w')).toBeNull();
        await d.ack('a', 'w', { result: bytes('out') });
        expect(text(await d.result('a'))).toBe('out');
        expect(await d.get('a')).toMatchObject({ state: 'succeeded', attempt: 1, workerId: 'w', leaseUntil: null });
      });

      it('an envelope is bytes: UTF-8 or not, it comes back exactly as submitted', async () => {
        // Planes may store UTF-8 envelopes as text (sql/submit.ts); none of these may change on the way.
        const envs: Record<string, Uint8Array> = {
          utf8: bytes('{"fn":"f","args":["é","日本",null]}'),
          bom: new Uint8Array([0xef, 0xbb, 0xbf, 0x7b, 0x7d]),
          nul: new Uint8Array([0x7b, 0x00, 0x7d]),
          binary: new Uint8Array([0xff, 0xfe, 0x00, 0x80, 0x41]),
          surrogate: new Uint8Array([0xed, 0xa0, 0x80]),
          truncated: new Uint8Array([0x41, 0xe6, 0x97]),
          empty: new Uint8Array(),
        };
        const names = Object.keys(envs);
        await d.submit('q', envs.utf8!, { id: 'one-utf8' });
        await d.submit('q', envs.binary!, { id: 'one-binary' });
        const many = await d.submitMany(
          'q',
          names.map((n) => ({ envelope: envs[n]!, opts: { id: n } })),
        );
        expect(many.every((r) => 'id' in r)).toBe(true);
        const claimed = new Map((await d.claimMany('q', 'w', 20)).map((c) => [c.id, [...c.envelope]]));
        expect(Object.fromEntries(claimed)).toEqual({
          'one-utf8': [...envs.utf8!],
          'one-binary': [...envs.binary!],
          ...Object.fromEntries(names.map((n) => [n, [...envs[n]!]])),
        });
        for (const n of names) expect([...(await d.get(n))!.envelope], n).toEqual([...envs[n]!]);
      });

      it('ack without a result answers null bytes', async () => {
        await d.submit('q', bytes('x'), { id: 'a' });
        await d.claim('q', 'w');
        await d.ack('a', 'w');
        expect(await d.result('a')).toBeNull();
      });

      it('nack retries to queued, or fails with the error', async () => {
        await d.submit('q', bytes('x'), { id: 'a' });
        await d.claim('q', 'w');
        await d.nack('a', 'w', { error: 'flaky' });
        expect(await d.get('a')).toMatchObject({ state: 'queued', attempt: 1, error: { message: 'flaky' } });
        expect((await d.claim('q', 'w'))!.attempt).toBe(2);
        await d.nack('a', 'w', { error: { message: 'bad', type: 'ValueError' }, retry: false });
        await expect(d.result('a')).rejects.toBeInstanceOf(InvocationFailedError);
        await expect(d.result('a')).rejects.toMatchObject({ error: { message: 'bad', type: 'ValueError' } });
      });

      it('cancel answers true once, and the result says cancelled', async () => {
        await d.submit('q', bytes('x'), { id: 'a' });
        expect(await d.cancel('a')).toBe(true);
        expect(await d.cancel('a')).toBe(false);
        expect(await d.claim('q', 'w')).toBeNull();
        await expect(d.result('a')).rejects.toBeInstanceOf(InvocationCancelledError);
        await expect(d.cancel('missing')).rejects.toBeInstanceOf(NotFoundError);
      });

      it('count counts each state', async () => {
        for (let i = 0; i < 5; i++) await d.submit('q', bytes('x'), { id: `j${i}` });
        await d.claim('q', 'w');
        await d.claim('q', 'w');
        await d.ack('j0', 'w');
        await d.cancel('j4');
        expect([
          await d.count('q'),
          await d.count('q', 'running'),
          await d.count('q', 'succeeded'),
          await d.count('q', 'cancelled'),
          await d.count('q', 'failed'),
        ]).toEqual([2, 1, 1, 1, 0]);
        expect(await d.count('other')).toBe(0);
      });

      it('result waits for the ack, and says when it timed out', async () => {
        await d.submit('q', bytes('x'), { id: 'a' });
        await expect(d.result('a', { timeoutMs: 30 })).rejects.toBeInstanceOf(TimeoutError);
        const waiting = d.result('a', { timeoutMs: 10_000 });
        const c = await d.claim('q', 'w');
        await parked();
        await d.ack(c!.id, 'w', { result: bytes('late') });
        expect(text(await waiting)).toBe('late');
        await expect(d.result('missing', { timeoutMs: 10 })).rejects.toBeInstanceOf(NotFoundError);
      });

      it('results waits on many jobs of a queue at once: those ended as soon as any is, and those it does not have', async () => {
        for (const id of ['m1', 'm2', 'm3']) await d.submit('q', bytes('x'), { id });
        await d.submit('other', bytes('x'), { id: 'elsewhere' });
        expect(await d.results('q', ['m1', 'm2'], { timeoutMs: 30 })).toEqual([]);
        await d.cancel('m3');
        const now = await d.results('q', ['m1', 'm3', 'nope', 'elsewhere', 'm3'], { timeoutMs: 10_000 });
        expect(now.map((e) => e.id).sort()).toEqual(['elsewhere', 'm3', 'nope']);
        const by = new Map(now.map((e) => [e.id, e]));
        expect(by.get('m3')).toMatchObject({ ok: false, error: expect.any(InvocationCancelledError) });
        expect(by.get('nope')).toMatchObject({ ok: false, error: expect.any(NotFoundError) });
        expect(by.get('elsewhere')).toMatchObject({ ok: false, error: expect.any(NotFoundError) });

        // Parked on both, answered by the first end with it alone.
        const waiting = d.results('q', ['m1', 'm2'], { timeoutMs: 10_000 });
        const c = await d.claim('q', 'w');
        await parked();
        await d.ack(c!.id, 'w', { result: bytes('one') });
        const first = await waiting;
        expect(first.map((e) => [e.id, e.ok && text(e.result)])).toEqual([['m1', 'one']]);

        const c2 = await d.claim('q', 'w');
        await d.nack(c2!.id, 'w', { error: { message: 'bad', type: 'ValueError' }, retry: false });
        const [failed] = await d.results('q', ['m2', 'm1']).then((r) => r.sort((a, b) => b.id.localeCompare(a.id)));
        expect(failed).toMatchObject({ id: 'm2', ok: false, error: expect.any(InvocationFailedError) });
        expect(failed?.ok === false && (failed.error as InvocationFailedError).error).toMatchObject({ message: 'bad', type: 'ValueError' });
      });

      it('results refuses what it cannot wait on, and waits on nothing then', async () => {
        await d.submit('q', bytes('x'), { id: 'r1' });
        await expect(d.results('q', [])).rejects.toBeInstanceOf(BadRequestError);
        await expect(
          d.results(
            'q',
            Array.from({ length: 1001 }, (_, i) => `x${i}`),
          ),
        ).rejects.toBeInstanceOf(BadRequestError);
        await expect(d.results('q', ['r1', ''])).rejects.toBeInstanceOf(BadRequestError);
        await expect(d.results('q', ['r1'], { timeoutMs: -1 })).rejects.toBeInstanceOf(BadRequestError);
        await expect(d.results('q', ['r1'], { timeoutMs: 300_001 })).rejects.toBeInstanceOf(BadRequestError);
        await expect(d.results('bad queue!', ['r1'])).rejects.toBeInstanceOf(BadRequestError);
        expect(await h.parked('q')).toBe(0);
        expect(await d.get('r1')).toMatchObject({ state: 'queued' });
      });

      it('result waits as long as asked, past the 300 s one wait of the HTTP route may take (an hour, here)', async () => {
        await d.submit('q', bytes('x'), { id: 'long' });
        const waiting = d.result('long', { timeoutMs: 3_600_000 });
        const c = await d.claim('q', 'w');
        await parked();
        await d.ack(c!.id, 'w', { result: bytes('in time') });
        expect(text(await waiting)).toBe('in time');
      });

      it('claim waits for a submit, and answers null when its wait runs out', async () => {
        expect(await d.claim('q', 'w', { waitMs: 30 })).toBeNull();
        const waiting = d.claim('q', 'w', { waitMs: 10_000 });
        await parked();
        const t0 = Date.now();
        await d.submit('q', bytes('x'), { id: 'late' });
        expect((await waiting)?.id).toBe('late');
        expect(Date.now() - t0).toBeLessThan(2_000);
      });

      it('submitMany keeps each item’s own id, key and idempotency, and a bad item fails alone', async () => {
        await d.submit('q', bytes('x'), { id: 'old', key: 'k-old' });
        const out = await d.submitMany('q', [
          { envelope: bytes('a'), opts: { id: 'a' } },
          { envelope: bytes('b'), opts: { id: 'b', key: 'k-old' } },
          { envelope: bytes('c'), opts: { id: '' } },
          { envelope: bytes('d'), opts: { id: 'd', priority: 2 } },
        ]);
        expect(out[0]).toEqual({ id: 'a' });
        expect(out[1]).toEqual({ id: 'old' });
        expect((out[2] as { error: Error }).error).toBeInstanceOf(BadRequestError);
        expect(out[3]).toEqual({ id: 'd' });
        expect(await d.count('q')).toBe(3);
        expect((await d.claim('q', 'w'))!.id).toBe('d');
      });

      it('submitMany: an id or key repeated inside one batch resolves to the first item, once', async () => {
        const out = await d.submitMany('q', [
          { envelope: bytes('1'), opts: { id: 'x', key: 'k1' } },
          { envelope: bytes('2'), opts: { id: 'x', key: 'k1' } },
          { envelope: bytes('3'), opts: { id: 'y', key: 'k1' } },
          { envelope: bytes('4'), opts: { id: 'z' } },
          { envelope: bytes('5'), opts: { id: 'z' } },
        ]);
        expect(out).toEqual([{ id: 'x' }, { id: 'x' }, { id: 'x' }, { id: 'z' }, { id: 'z' }]);
        expect(await d.count('q')).toBe(2);
        expect(text((await d.claim('q', 'w'))!.envelope)).toBe('1');
        expect(text((await d.claim('q', 'w'))!.envelope)).toBe('4');
      });

      it('acks of two attempts of one invocation sent at once: only the attempt that holds it succeeds', async () => {
        await d.submit('q', bytes('x'), { id: 'two' });
        const first = (await d.claim('q', 'w', { leaseMs: h.shortLeaseMs }))!;
        await h.elapse(h.shortLeaseMs + 1);
        const second = (await d.claim('q', 'w'))!; // the same worker, its first lease expired
        expect([first.attempt, second.attempt]).toEqual([1, 2]);
        const acks = await Promise.allSettled([
          d.ack('two', 'w', { attempt: 1, result: bytes('stale') }),
          d.ack('two', 'w', { attempt: 2, result: bytes('fresh') }),
        ]);
        expect(acks[0]!.status).toBe('rejected');
        expect((acks[0] as PromiseRejectedResult).reason).toBeInstanceOf(FencingConflictError);
        expect(acks[1]!.status).toBe('fulfilled');
        expect(text(await d.result('two'))).toBe('fresh');
      });

      it('the same ack sent twice at once lands once; the repeat is absorbed', async () => {
        await d.submit('q', bytes('x'), { id: 'twice' });
        const c = (await d.claim('q', 'w'))!;
        const acks = await Promise.allSettled([d.ack(c.id, 'w', { result: bytes('r') }), d.ack(c.id, 'w', { result: bytes('r') })]);
        expect(acks.map((a) => a.status)).toEqual(['fulfilled', 'fulfilled']);
        expect(text(await d.result('twice'))).toBe('r');
      });

      it('concurrent submits and acks each get their own answer; a stale ack fails alone', async () => {
        const ids = await Promise.all(Array.from({ length: 6 }, (_, i) => d.submit('q', bytes('x'), { id: `c${i}` })));
        expect(ids).toEqual(['c0', 'c1', 'c2', 'c3', 'c4', 'c5']);
        // Concurrent submits may land in any order (the Python plane runs each call on a thread of its
        // own), so the claim's order is not theirs: the stale ack is c2's, wherever c2 came.
        const got = await d.claimMany('q', 'w', 6);
        expect(got.map((c) => c.id).sort()).toEqual(ids);
        const acks = await Promise.allSettled(got.map((c) => d.ack(c.id, c.id === 'c2' ? 'intruder' : 'w', { result: bytes(c.id) })));
        const ackOf = new Map(got.map((c, i) => [c.id, acks[i]!]));
        expect(ids.map((id) => ackOf.get(id)!.status)).toEqual([
          'fulfilled',
          'fulfilled',
          'rejected',
          'fulfilled',
          'fulfilled',
          'fulfilled',
        ]);
        expect((ackOf.get('c2') as PromiseRejectedResult).reason).toBeInstanceOf(FencingConflictError);
        expect(await d.count('q', 'succeeded')).toBe(5);
        expect(text(await d.result('c0'))).toBe('c0');
      });

      it('claimMany with filo takes the top priority level, newest first', async () => {
        for (let i = 0; i < 4; i++) await d.submit('q', bytes('x'), { id: `f${i}`, priority: i < 3 ? 1 : 0 });
        expect((await d.claimMany('q', 'w', 5, { kind: 'filo' })).map((c) => c.id)).toEqual(['f2', 'f1', 'f0']);
        expect((await d.claimMany('q', 'w', 5, { kind: 'filo' })).map((c) => c.id)).toEqual(['f3']);
      });

      it('claimMany claims up to max in claim order', async () => {
        for (let i = 0; i < 5; i++) await d.submit('q', bytes('x'), { id: `j${i}` });
        expect((await d.claimMany('q', 'w', 3)).map((c) => c.id)).toEqual(['j0', 'j1', 'j2']);
        expect((await d.claimMany('q', 'w', 3)).map((c) => c.id)).toEqual(['j3', 'j4']);
      });
    });

    describe('errors', () => {
      it('bad input raises BadRequestError or PayloadTooLargeError and changes nothing', async () => {
        await d.submit('q', bytes('x'), { id: 'seed' });
        await expect(d.submit('q', bytes('x'), { id: '' })).rejects.toBeInstanceOf(BadRequestError);
        await expect(d.submit('q', bytes('x'), { id: 'a\u0000b' })).rejects.toBeInstanceOf(BadRequestError);
        await expect(d.submit('bad queue', bytes('x'), { id: 'a' })).rejects.toBeInstanceOf(BadRequestError);
        // An empty queue name is named as such, not answered as a path with no route.
        await expect(d.submit('', bytes('x'), { id: 'a' })).rejects.toThrow(/queue must not be empty/);
        await expect(d.claim('', 'w')).rejects.toThrow(/queue must not be empty/);
        await expect(d.count('')).rejects.toThrow(/queue must not be empty/);
        await expect(d.submit('q', bytes('x'), { id: 'a', priority: Number.NaN })).rejects.toBeInstanceOf(BadRequestError);
        await expect(d.submit('q', new Uint8Array((1 << 20) + 1), { id: 'big' })).rejects.toBeInstanceOf(PayloadTooLargeError);
        await expect(d.claim('q', 'w', { kind: 'random' as 'fifo' })).rejects.toBeInstanceOf(BadRequestError);
        await expect(d.claim('q', 'w', { waitMs: -1 })).rejects.toBeInstanceOf(BadRequestError);
        await expect(d.claim('q', 'w', { waitMs: 60_001 })).rejects.toBeInstanceOf(BadRequestError);
        await expect(d.count('q', 'sleeping' as 'queued')).rejects.toBeInstanceOf(BadRequestError);
        await expect(d.result('seed', { timeoutMs: -5 })).rejects.toBeInstanceOf(BadRequestError);
        await expect(d.journalAppend('seed', null, frame(9, 'x'), { workerId: 'w' })).rejects.toBeInstanceOf(BadRequestError);
        expect(await d.count('q')).toBe(1);
        expect(await d.get('a')).toBeNull();
      });

      it('bad input is told in the same words on every plane', async () => {
        // The words of src/core/validate.ts and its callers. Left out: the arguments each language
        // spells in its own unit (Python's `wait`, `lease`, `delay` and `timeout` are seconds).
        await d.submit('q', bytes('x'), { id: 'seed' });
        const held = (await d.claim('q', 'w'))!;
        const told: [() => Promise<unknown>, string, string][] = [
          [() => d.submit('q', bytes('x'), { id: '' }), 'bad_request', 'id must not be empty'],
          [() => d.submit('q', bytes('x'), { id: 'x'.repeat(201) }), 'bad_request', 'id is longer than 200 characters'],
          [() => d.submit('q', bytes('x'), { id: 7 as unknown as string }), 'bad_request', 'id must be a string'],
          [() => d.submit('q', bytes('x'), { id: 'a\u0000b' }), 'bad_request', 'id must not contain control characters or invalid unicode'],
          [
            () => d.submit('bad queue', bytes('x'), { id: 'a' }),
            'bad_request',
            'queue "bad queue" may hold only letters, digits and . _ : - and must start with a letter or digit',
          ],
          [() => d.submit('q'.repeat(129), bytes('x'), { id: 'a' }), 'bad_request', 'queue is longer than 128 characters'],
          [() => d.submit('q', bytes('x'), { id: 'a', key: 'k'.repeat(201) }), 'bad_request', 'key is longer than 200 characters'],
          [() => d.submit('q', bytes('x'), { id: 'a', priority: Number.NaN }), 'bad_request', 'priority must be a finite number'],
          [
            () => d.submit('q', new Uint8Array((1 << 20) + 1), { id: 'big' }),
            'payload_too_large',
            'envelope is 1048577 bytes; the limit is 1048576',
          ],
          [() => d.submit('q', bytes('x'), { id: 'a', maxAttempts: 0 }), 'bad_request', 'max_attempts must be at least 1'],
          [
            () => d.claim('q', 'w', { kind: 'random' as 'fifo' }),
            'bad_request',
            'unknown claim kind "random": expected fifo (or its alias priority), filo or boltzmann',
          ],
          [() => d.claimMany('q', 'w', 0), 'bad_request', 'max must be at least 1'],
          [() => d.claimMany('q', 'w', 1001), 'bad_request', 'max must be at most 1000'],
          [() => d.claimMany('q', 'w', 1.5), 'bad_request', 'max must be a non-negative integer'],
          [() => d.claim('q', 'w'.repeat(201)), 'bad_request', 'worker_id is longer than 200 characters'],
          [
            () => d.count('q', 'sleeping' as 'queued'),
            'bad_request',
            'unknown state "sleeping": expected delayed, queued, running, succeeded, failed or cancelled',
          ],
          [
            () => d.list('q', { state: 'nope' as 'queued' }),
            'bad_request',
            'unknown state "nope": expected delayed, queued, running, succeeded, failed or cancelled',
          ],
          [
            () => d.journalAppend(held.id, null, frame(9, 'x'), { workerId: 'w' }),
            'bad_request',
            'unknown frame kind 9: expected 0 (VALUE), 1 (CHUNK), 2 (BEGIN), 3 (END) or 4 (ERROR)',
          ],
          [() => d.journalAppend(held.id, -1, frame(0, 'x'), { workerId: 'w' }), 'bad_request', 'seq must be a non-negative integer'],
          [() => d.journalPage('seed', { limit: 0 }), 'bad_request', 'limit must be at least 1'],
          [() => d.journalPage('seed', { limit: 10_001 }), 'bad_request', 'limit must be at most 10000'],
          [() => d.journalTrim('seed', -1), 'bad_request', 'keep_last must be a non-negative integer'],
          [() => d.list('q', { limit: 0 }), 'bad_request', 'limit must be at least 1'],
          [() => d.list('q', { limit: 1001 }), 'bad_request', 'limit must be at most 1000'],
          [() => d.redrive('q', { limit: 0 }), 'bad_request', 'limit must be at least 1'],
          [() => d.purge('q', { state: 'failed', limit: 0 }), 'bad_request', 'limit must be at least 1'],
          [
            () => d.setSchedule('q', '-bad', { cron: '* * * * *', envelope: bytes('x') }),
            'bad_request',
            'schedule name "-bad" may hold only letters, digits and . _ : - and must start with a letter or digit',
          ],
          [() => d.configureQueue('q', { retentionMs: 0 }), 'bad_request', 'retention_ms must be at least 1'],
          [
            () => d.getMany(Array.from({ length: 1001 }, (_, i) => `i${i}`)),
            'bad_request',
            'a batch holds at most 1000 items; this one holds 1001',
          ],
        ];
        const said: string[] = [];
        for (const [call, code, message] of told) {
          const e = await call().then(
            () => null,
            (e: { code?: string; message?: string }) => e,
          );
          said.push(e ? `${e.code}: ${e.message}` : 'taken');
          expect(said.at(-1)).toBe(`${code}: ${message}`);
        }
        // Nothing changed: the seed still held, no other job.
        expect(await d.get('seed')).toMatchObject({ state: 'running', attempt: 1 });
        expect(await d.count('q', 'queued')).toBe(0);
      });

      it('an id or worker id no URL can carry is refused by every verb that names one, with nothing changed', async () => {
        // `.` and `..` are resolved away in a URL's path (by fetch, curl, Cloudflare), `%2e` too: a
        // job or worker so named could never be reached over HTTP, so no plane takes one.
        await d.submit('q', bytes('x'), { id: 'seed' });
        const held = (await d.claim('q', 'w'))!;
        const refused = async (what: string, call: () => Promise<unknown>) => {
          const err = await call().then(
            () => null,
            (e: unknown) => e,
          );
          expect(err, what).toBeInstanceOf(BadRequestError);
        };
        for (const bad of ['', '.', '..', 'a\u0000b']) {
          const say = JSON.stringify(bad);
          await refused(`submit ${say}`, () => d.submit('q', bytes('x'), { id: bad }));
          const [item] = await d.submitMany('q', [{ envelope: bytes('x'), opts: { id: bad } }]);
          expect(item, `submitMany ${say}`).toHaveProperty('error');
          expect((item as { error: Error }).error, `submitMany ${say}`).toBeInstanceOf(BadRequestError);
          await refused(`get ${say}`, () => d.get(bad));
          await refused(`getMany ${say}`, () => d.getMany(['seed', bad]));
          await refused(`result ${say}`, () => d.result(bad, { timeoutMs: 0 }));
          await refused(`results ${say}`, () => d.results('q', ['seed', bad], { timeoutMs: 0 }));
          await refused(`cancel ${say}`, () => d.cancel(bad));
          await refused(`retry ${say}`, () => d.retry(bad));
          await refused(`delete ${say}`, () => d.delete(bad));
          await refused(`ack ${say}`, () => d.ack(bad, 'w'));
          await refused(`nack ${say}`, () => d.nack(bad, 'w', { error: 'x' }));
          await refused(`heartbeat ${say}`, () => d.heartbeat(bad, 'w'));
          await refused(`journalAppend ${say}`, () => d.journalAppend(bad, 0, frame(0, 'x'), { workerId: 'w' }));
          await refused(`journalPage ${say}`, () => d.journalPage(bad));
          await refused(`journalRead ${say}`, () => drain(d.journalRead(bad, { timeoutMs: 100 })));
          await refused(`journalTrim ${say}`, () => d.journalTrim(bad, 0));
          // ...and as the worker's name.
          await refused(`claim as ${say}`, () => d.claim('q', bad));
          await refused(`ack as ${say}`, () => d.ack(held.id, bad));
          await refused(`heartbeat as ${say}`, () => d.heartbeat(held.id, bad));
          await refused(`journalAppend as ${say}`, () => d.journalAppend(held.id, 0, frame(0, 'x'), { workerId: bad }));
          await refused(`workerStopped ${say}`, () => d.workerStopped('q', bad));
          await refused(`workerLog ${say}`, () => d.workerLog('q', bad, [{ id: 'seed', level: 'info', message: 'm' }]));
        }
        // Nothing changed: the seed still held by w, with no frame, and no other job.
        expect(await d.get('seed')).toMatchObject({ state: 'running', workerId: 'w', attempt: 1 });
        expect((await d.journalPage('seed')).frames).toEqual([]);
        expect(await d.count('q', 'queued')).toBe(0);
        expect(await d.count('q', 'running')).toBe(1);
        // A dot inside an id is an id like any other.
        await d.submit('q', bytes('x'), { id: '...' });
        await d.submit('q', bytes('x'), { id: 'a/../b' });
        expect((await d.getMany(['...', 'a/../b'])).map((s) => s?.id)).toEqual(['...', 'a/../b']);
      });

      it('unknown ids raise NotFoundError from every verb that names one', async () => {
        await expect(d.ack('ghost', 'w')).rejects.toBeInstanceOf(NotFoundError);
        await expect(d.nack('ghost', 'w', { error: 'x' })).rejects.toBeInstanceOf(NotFoundError);
        await expect(d.heartbeat('ghost', 'w')).rejects.toBeInstanceOf(NotFoundError);
        await expect(d.journalAppend('ghost', 0, frame(0, 'x'), { workerId: 'w' })).rejects.toBeInstanceOf(NotFoundError);
        await expect(d.journalTrim('ghost', 0)).rejects.toBeInstanceOf(NotFoundError);
        await expect(drain(d.journalRead('ghost'))).rejects.toBeInstanceOf(NotFoundError);
      });
    });

    describe('design rules', () => {
      it('rule 1: one row per invocation, whatever happens to it', async () => {
        await d.submit('q', bytes('x'), { id: 'a', key: 'k' });
        await d.submit('q', bytes('x'), { id: 'a', key: 'k' });
        await d.claim('q', 'w');
        await d.nack('a', 'w', { error: 'again' });
        await d.claim('q', 'w');
        await d.ack('a', 'w');
        const all = (
          await Promise.all(['queued', 'running', 'succeeded', 'failed', 'cancelled'].map((s) => d.count('q', s as 'queued')))
        ).reduce((x, y) => x + y, 0);
        expect(all).toBe(1);
      });

      it('rule 2: a transition from the wrong state is a clean miss that changes nothing', async () => {
        await d.submit('q', bytes('x'), { id: 'a' });
        await expect(d.ack('a', 'w')).rejects.toBeInstanceOf(FencingConflictError);
        expect(await d.get('a')).toMatchObject({ state: 'queued', attempt: 0 });
        await d.claim('q', 'w');
        await d.ack('a', 'w', { result: bytes('r') });
        expect(await d.cancel('a')).toBe(false);
        await expect(d.nack('a', 'w', { error: 'late' })).rejects.toBeInstanceOf(FencingConflictError);
        expect(await d.get('a')).toMatchObject({ state: 'succeeded', error: null });
      });

      it('rule 2: concurrent claims never hand out the same job twice', async () => {
        for (let i = 0; i < 10; i++) await d.submit('q', bytes('x'), { id: `j${i}` });
        const got = await Promise.all(Array.from({ length: 30 }, (_, i) => d.claim('q', `w${i}`)));
        const ids = got.filter((c) => c !== null).map((c) => c!.id);
        expect(ids).toHaveLength(10);
        expect(new Set(ids).size).toBe(10);
      });

      it('rule 3: a stale worker is fenced once its lease expired and its job was claimed again', async () => {
        await d.submit('q', bytes('x'), { id: 'a' });
        const first = await d.claim('q', 'A', { leaseMs: h.shortLeaseMs });
        await h.elapse(h.shortLeaseMs + 1);
        const second = await d.claim('q', 'B', { leaseMs: 60_000 });
        expect(second).toMatchObject({ id: 'a', attempt: 2 });
        await expect(d.ack('a', 'A', { attempt: first!.attempt, result: bytes('stale') })).rejects.toBeInstanceOf(FencingConflictError);
        await expect(d.nack('a', 'A', { attempt: first!.attempt, error: 'stale' })).rejects.toBeInstanceOf(FencingConflictError);
        await expect(d.heartbeat('a', 'A', { attempt: first!.attempt })).rejects.toBeInstanceOf(FencingConflictError);
        await expect(d.journalAppend('a', 0, frame(0, 'stale'), { workerId: 'A', attempt: first!.attempt })).rejects.toBeInstanceOf(
          FencingConflictError,
        );
        expect(await d.get('a')).toMatchObject({ state: 'running', attempt: 2, workerId: 'B' });
        await d.ack('a', 'B', { result: bytes('fresh') });
        expect(text(await d.result('a'))).toBe('fresh');
      });

      it('rule 4: submit is idempotent on the key, per queue', async () => {
        expect(await d.submit('q', bytes('x'), { id: 'a', key: 'k' })).toBe('a');
        expect(await d.submit('q', bytes('y'), { id: 'b', key: 'k' })).toBe('a');
        expect(await d.submit('q2', bytes('y'), { id: 'c', key: 'k' })).toBe('c');
        expect(await d.submit('q', bytes('x'), { id: 'a' })).toBe('a');
        await expect(d.submit('q2', bytes('x'), { id: 'a' })).rejects.toBeInstanceOf(FencingConflictError);
        expect(await d.count('q')).toBe(1);
      });

      it('rule 5: counts come from the same rows the verbs move', async () => {
        for (let i = 0; i < 6; i++) await d.submit('q', bytes('x'), { id: `j${i}`, priority: i % 2 });
        const c = await d.claimMany('q', 'w', 4);
        await d.ack(c[0]!.id, 'w');
        await d.nack(c[1]!.id, 'w', { error: 'e', retry: false });
        await d.nack(c[2]!.id, 'w', { error: 'e', retry: true });
        const states = await Promise.all(['j0', 'j1', 'j2', 'j3', 'j4', 'j5'].map(async (id) => (await d.get(id))!.state));
        for (const s of ['queued', 'running', 'succeeded', 'failed', 'cancelled'] as const) {
          expect(await d.count('q', s), s).toBe(states.filter((x) => x === s).length);
        }
      });

      it('rule 6: the journal is derived, and a trim degrades to the row', async () => {
        await d.submit('q', bytes('x'), { id: 'a' });
        await d.claim('q', 'w');
        for (let i = 0; i < 4; i++) await d.journalAppend('a', i, frame(FrameKind.CHUNK, `c${i}`));
        await d.ack('a', 'w', { result: bytes('whole') });
        expect(await d.journalTrim('a', 1)).toBe(3);
        expect((await drain(d.journalRead('a'))).map((f) => f.seq)).toEqual([3]);
        expect(await d.journalTrim('a', 0)).toBe(1);
        expect(await drain(d.journalRead('a'))).toEqual([]);
        expect(text(await d.result('a'))).toBe('whole');
      });
    });

    describe('leases and heartbeats', () => {
      it('an expired lease is reclaimed by the next claim, as a new attempt', async () => {
        await d.submit('q', bytes('x'), { id: 'a' });
        await d.claim('q', 'dead', { leaseMs: h.shortLeaseMs });
        await h.elapse(h.shortLeaseMs + 1);
        expect(await d.claim('q', 'live')).toMatchObject({ id: 'a', attempt: 2 });
      });

      unless('configure')('fails the invocation with a reason once its attempts are used up', async () => {
        await d.configureQueue('q', { maxAttempts: 1 });
        await d.submit('q', bytes('x'), { id: 'a' });
        await d.claim('q', 'dead', { leaseMs: h.shortLeaseMs });
        await h.elapse(h.shortLeaseMs + 1);
        expect(await d.claim('q', 'live')).toBeNull();
        await expect(d.result('a')).rejects.toMatchObject({
          error: { type: 'AttemptsExhausted', attempts: 1, last: { type: 'LeaseExpired' } },
        });
      });

      it('a lease that ran out is gone: its worker can no longer ack, nack, heartbeat or append, alone or with a claim, and the row is as the lease left it', async () => {
        await d.submit('q', bytes('x'), { id: 'late' });
        const c = (await d.claim('q', 'w', { leaseMs: h.shortLeaseMs }))!;
        await d.journalAppend('late', 0, frame(FrameKind.CHUNK, 'in time'), { workerId: 'w', attempt: c.attempt });
        await h.elapse(h.shortLeaseMs + 1);
        const holder = { attempt: c.attempt };
        for (const late of [
          () => d.ack('late', 'w', { ...holder, result: bytes('late') }),
          () =>
            d.ackAndClaim('q', 'w', [{ id: 'late', ...holder, result: bytes('late') }], 1, { waitMs: 0 }).then((out) => {
              if (out.acks[0]) throw out.acks[0];
              throw new Error(`the late ack landed (claimed ${out.claimed.map((x) => x.id).join()})`);
            }),
          () => d.nack('late', 'w', { ...holder, error: 'late', retry: false }),
          () => d.heartbeat('late', 'w', { ...holder, leaseMs: 60_000 }),
          () => d.journalAppend('late', 1, frame(FrameKind.CHUNK, 'late'), { workerId: 'w', ...holder }),
        ])
          await expect(late()).rejects.toBeInstanceOf(FencingConflictError);
        // Still running with its lease in the past where no sweep came yet (the ackAndClaim's own
        // claim may have taken it back as attempt 2 for w); never finished, never extended.
        const row = (await d.get('late'))!;
        expect(row).toMatchObject({ workerId: 'w', result: null, error: null });
        if (row.attempt === 1) {
          expect(['running', 'queued']).toContain(row.state);
          if (row.state === 'running') expect(row.leaseUntil).toBe(c.leaseUntil);
        } else expect(row).toMatchObject({ state: 'running', attempt: 2 });
        expect((await d.journalPage('late')).frames.map((f) => [f.seq, text(f.body)])).toEqual([[0, 'in time']]);
      });

      it('a heartbeat extends the lease and reports cancellation to the holder', async () => {
        await d.submit('q', bytes('x'), { id: 'a' });
        const c = await d.claim('q', 'w', { leaseMs: 30_000 });
        const hb = await d.heartbeat('a', 'w', { leaseMs: 60_000 });
        expect(hb.cancelled).toBe(false);
        expect(hb.leaseUntil!).toBeGreaterThan(c!.leaseUntil);
        await d.cancel('a');
        expect(await d.heartbeat('a', 'w')).toEqual({ leaseUntil: null, cancelled: true });
        await expect(d.ack('a', 'w')).rejects.toBeInstanceOf(FencingConflictError);
      });

      unless('configure')('a queue setting sets the default lease', async () => {
        await d.configureQueue('q', { leaseMs: 20_000 });
        await d.submit('q', bytes('x'), { id: 'a' });
        const t0 = h.now();
        const c = await d.claim('q', 'w');
        const t1 = h.now();
        expect(c!.leaseUntil).toBeGreaterThanOrEqual(t0 + 20_000);
        expect(c!.leaseUntil).toBeLessThanOrEqual(t1 + 20_000);
      });
    });

    describe('journal', () => {
      it('an append with a known seq is idempotent; without one the next seq is assigned', async () => {
        await d.submit('q', bytes('x'), { id: 'a' });
        await d.claim('q', 'w');
        expect(await d.journalAppend('a', null, frame(0, 'v0'))).toBe(0);
        expect(await d.journalAppend('a', 1, frame(0, 'v1'))).toBe(1);
        expect(await d.journalAppend('a', 1, frame(0, 'v1'))).toBe(1);
        expect(await d.journalAppend('a', null, encodeFrame(frame(0, 'v2')))).toBe(2);
        await d.ack('a', 'w');
        expect((await drain(d.journalRead('a'))).map((f) => text(f.body))).toEqual(['v0', 'v1', 'v2']);
      });

      it('reads from a since-cursor', async () => {
        await d.submit('q', bytes('x'), { id: 'a' });
        await d.claim('q', 'w');
        for (let i = 0; i < 5; i++) await d.journalAppend('a', i, frame(0, `v${i}`));
        await d.journalAppend('a', 5, frame(FrameKind.END, ''));
        expect((await drain(d.journalRead('a', { since: 2 }))).map((f) => f.seq)).toEqual([3, 4, 5]);
      });

      it('a blocking read receives frames as they are appended, and ends at the final frame', async () => {
        await d.submit('q', bytes('x'), { id: 'a' });
        await d.claim('q', 'w');
        const seen: number[] = [];
        const reading = (async () => {
          for await (const f of d.journalRead('a', { timeoutMs: 10_000 })) seen.push(f.seq);
        })();
        await d.journalAppend('a', 0, frame(0, 'v0'));
        await until(() => seen.length > 0, 'the first frame, while the job still runs');
        expect(seen).toEqual([0]);
        await d.journalAppend('a', 1, frame(FrameKind.END, ''));
        await reading;
        expect(seen).toEqual([0, 1]);
      });

      it('a read ends when the row ends, even without a final frame', async () => {
        await d.submit('q', bytes('x'), { id: 'a' });
        await d.claim('q', 'w');
        await d.journalAppend('a', 0, frame(0, 'v0'));
        const reading = drain(d.journalRead('a', { timeoutMs: 10_000 }));
        await parked();
        await d.cancel('a');
        expect((await reading).map((f) => f.seq)).toEqual([0]);
      });

      it('a retried attempt continues the journal: frames carry their attempt, a retried ERROR is not final', async () => {
        await d.submit('q', bytes('x'), { id: 'a' });
        await d.claim('q', 'w');
        await d.journalAppend('a', null, frame(FrameKind.BEGIN, ''));
        await d.journalAppend('a', null, frame(FrameKind.ERROR, 'boom'), { final: false });
        await d.nack('a', 'w', { error: 'boom' });
        await d.claim('q', 'w');
        await d.journalAppend('a', null, frame(FrameKind.BEGIN, ''));
        await d.journalAppend('a', null, frame(FrameKind.VALUE, 'ok'));
        await d.journalAppend('a', null, frame(FrameKind.END, ''));
        const all = await drain(d.journalRead('a', { timeoutMs: 5_000 }));
        expect(all.map((f) => [f.seq, f.kind, f.attempt, f.final])).toEqual([
          [0, FrameKind.BEGIN, 1, false],
          [1, FrameKind.ERROR, 1, false],
          [2, FrameKind.BEGIN, 2, false],
          [3, FrameKind.VALUE, 2, false],
          [4, FrameKind.END, 2, true],
        ]);
      });
    });

    claimKinds(() => d, lacks, statClaims);
    part('ackAndClaim')('(ack and claim)', () => ackAndClaim(() => d));
    journalRules(() => d);
    largeValues(() => d);
    attempts(() => d, lacks);
    scheduling(() => h, lacks);
    part('views')('(views)', () => views(() => h));
    part('retention')('(retention)', () => retention(() => h));
    part('observing')('(feed and metrics)', () => observing(() => h));
    storageBudget(storagePlane);
    pushDelivery(() => h);
  });
}
