/**
 * Conformance: what a hosted queue schedules, the same on every plane. Delays and backoff, the
 * attempt budget per job, retry and redrive, dead letters, pause, the running cap, the claim
 * rate, TTLs and cron schedules. Times are the plane's: moved at once where its clock can be
 * (the local planes), waited for over HTTP (with durations short enough to keep the suite quick,
 * and bounded waits for the expected state).
 */
import { beforeEach, describe, expect, it } from 'vitest';
import {
  BadRequestError,
  FencingConflictError,
  InvocationFailedError,
  NotFoundError,
  type DispatchPlane,
  type FeedItem,
} from '../../client/local/index.ts';
import { attachedFeed, type PlaneHandle } from './planes.ts';
import { until } from '../support/wait.ts';

const bytes = (s: string) => new TextEncoder().encode(s);
const text = (b: Uint8Array | null) => (b === null ? null : new TextDecoder().decode(b));

export function scheduling(handle: () => PlaneHandle, lacks: ReadonlySet<string> = new Set()) {
  const unless = (name: string) => it.skipIf(lacks.has(name));
  describe('scheduling', () => {
    let h: PlaneHandle;
    let d: DispatchPlane;
    /** A span of the plane's time that a test lets pass: moved at once on a local plane, waited out over HTTP. */
    let T: number;
    beforeEach(() => {
      h = handle();
      d = h.plane;
      T = h.shortLeaseMs;
    });
    const parked = (queue: string, n = 1) => until(async () => (await h.parked(queue)) >= n, `${n} parked call(s) on ${queue}`);

    describe('delays and backoff', () => {
      it('a delayed job is not claimable before its time, and is after it', async () => {
        const t0 = h.now();
        await d.submit('q', bytes('later'), { id: 'd1', delayMs: T });
        await d.submit('q', bytes('past'), { id: 'd2', runAt: t0 - 1 }); // a run_at already passed: due now
        expect(await d.get('d1')).toMatchObject({ state: 'delayed', runAt: expect.any(Number) });
        expect((await d.get('d1'))!.runAt!).toBeGreaterThanOrEqual(t0 + T);
        expect(await d.count('q', 'delayed')).toBe(1);
        expect((await d.claim('q', 'w'))?.id).toBe('d2');
        expect(await d.claim('q', 'w')).toBeNull();
        await h.elapse(T + 1);
        expect(await d.claim('q', 'w')).toMatchObject({ id: 'd1', attempt: 1 });
        expect(await d.count('q', 'delayed')).toBe(0);
      });

      it('a claim parked on an empty queue wakes when the earliest delayed job comes due', async () => {
        await d.submit('q', bytes('x'), { id: 'soon', delayMs: 300 });
        const t0 = Date.now();
        const c = await d.claim('q', 'w', { waitMs: 20_000 });
        expect(c?.id).toBe('soon');
        expect(Date.now() - t0).toBeLessThan(10_000);
      });

      it('a retry waits the queue’s backoff, growing by its factor; a nack may name its own delay', async () => {
        await d.configureQueue('q', { maxAttempts: 5, retryBackoff: { initialMs: T, factor: 2, maxMs: 10 * T, jitter: 0 } });
        await d.submit('q', bytes('x'), { id: 'b' });
        await d.claim('q', 'w');
        let t = h.now();
        await d.nack('b', 'w', { error: 'flaky' });
        const first = (await d.get('b'))!;
        expect(first.state).toBe('delayed');
        expect(first.runAt!).toBeGreaterThanOrEqual(t + T);
        expect(first.runAt!).toBeLessThanOrEqual(h.now() + T);
        expect(await d.claim('q', 'w')).toBeNull();
        await h.elapse(T + 1);
        expect((await d.claim('q', 'w'))?.attempt).toBe(2);
        t = h.now();
        await d.nack('b', 'w', { error: 'flaky again' });
        expect((await d.get('b'))!.runAt! - t).toBeGreaterThanOrEqual(2 * T); // initial x factor
        await h.elapse(2 * T + 1);
        expect((await d.claim('q', 'w'))?.attempt).toBe(3);
        await d.nack('b', 'w', { error: 'now', delayMs: 0 }); // its own delay wins: none
        expect((await d.get('b'))!.state).toBe('queued');
      });

      it('refuses negative and far-future times, and both forms of one, changing nothing', async () => {
        await expect(d.submit('q', bytes('x'), { id: 'n1', delayMs: -1 })).rejects.toBeInstanceOf(BadRequestError);
        await expect(d.submit('q', bytes('x'), { id: 'n2', delayMs: Number.NaN })).rejects.toBeInstanceOf(BadRequestError);
        await expect(d.submit('q', bytes('x'), { id: 'n3', runAt: h.now() + 400 * 86_400_000 })).rejects.toBeInstanceOf(BadRequestError);
        await expect(d.submit('q', bytes('x'), { id: 'n4', delayMs: 5, runAt: h.now() })).rejects.toBeInstanceOf(BadRequestError);
        await expect(d.submit('q', bytes('x'), { id: 'n5', ttlMs: 0 })).rejects.toBeInstanceOf(BadRequestError);
        await expect(d.configureQueue('q', { maxRunning: 0 })).rejects.toBeInstanceOf(BadRequestError);
        await expect(d.configureQueue('q', { retryBackoff: { factor: 0.5 } })).rejects.toBeInstanceOf(BadRequestError);
        await expect(d.configureQueue('q', { claimsPerSecond: -1 })).rejects.toBeInstanceOf(BadRequestError);
        expect((await d.count('q', 'delayed')) + (await d.count('q'))).toBe(0);
        expect((await d.queueInfo('q')).settings).toMatchObject({ maxRunning: null, retryBackoff: null, claimsPerSecond: null });
      });
    });

    describe('the attempt budget, retry, redrive and dead letters', () => {
      it('a job’s own max_attempts is its budget: a failure on its last attempt is final', async () => {
        await d.submit('q', bytes('x'), { id: 'once', maxAttempts: 1 });
        expect(await d.get('once')).toMatchObject({ maxAttempts: 1 });
        await d.claim('q', 'w');
        await d.nack('once', 'w', { error: 'boom' });
        await expect(d.result('once')).rejects.toMatchObject({ error: { type: 'AttemptsExhausted', last: { message: 'boom' } } });
      });

      it('a nack’s max_attempts (the worker’s budget) rules only where neither the job nor its queue sets one', async () => {
        // No budget on the job or queue: the worker's 5 beats the plane's default 3.
        await d.submit('q', bytes('x'), { id: 'wb' });
        for (let a = 1; a <= 4; a++) {
          expect((await d.claim('q', 'w'))?.id).toBe('wb');
          expect(await d.nack('wb', 'w', { error: 'x', maxAttempts: 5 })).toBe('queued');
        }
        await d.claim('q', 'w');
        expect(await d.nack('wb', 'w', { error: 'x', maxAttempts: 5 })).toBe('failed');
        await expect(d.result('wb')).rejects.toMatchObject({
          error: { type: 'AttemptsExhausted', attempts: 5, message: 'x (attempt 5 of 5, none left)' },
        });
        // The job's own budget wins over the worker's.
        await d.submit('q', bytes('x'), { id: 'jb', maxAttempts: 1 });
        await d.claim('q', 'w');
        expect(await d.nack('jb', 'w', { error: 'x', maxAttempts: 5 })).toBe('failed');
        // So does the queue's.
        await d.configureQueue('q2', { maxAttempts: 2 });
        await d.submit('q2', bytes('x'), { id: 'qb' });
        await d.claim('q2', 'w');
        expect(await d.nack('qb', 'w', { error: 'x', maxAttempts: 9 })).toBe('queued');
        await d.claim('q2', 'w');
        expect(await d.nack('qb', 'w', { error: 'x', maxAttempts: 9 })).toBe('failed');
        await expect(d.nack('qb', 'w', { error: 'x', maxAttempts: 0 })).rejects.toBeInstanceOf(BadRequestError);
      });

      unless('retry')(
        'retry puts a failed job back with a fresh budget, the same id and its journal; its stale worker stays fenced',
        async () => {
          await d.submit('q', bytes('x'), { id: 'r', maxAttempts: 1 });
          const first = (await d.claim('q', 'w1'))!;
          await d.journalAppend('r', null, { kind: 4, seq: 0, body: bytes('first try'), meta: null });
          await d.nack('r', 'w1', { error: 'boom', retry: false });
          await expect(d.result('r')).rejects.toBeInstanceOf(InvocationFailedError);
          await d.retry('r');
          expect(await d.get('r')).toMatchObject({ state: 'queued', attempt: 1 });
          const again = (await d.claim('q', 'w2'))!;
          expect(again).toMatchObject({ id: 'r', attempt: 2 });
          await expect(d.ack('r', 'w1', { attempt: first.attempt })).rejects.toBeInstanceOf(FencingConflictError);
          await d.ack('r', 'w2', { result: bytes('second try') });
          expect(text(await d.result('r'))).toBe('second try');
          expect((await d.journalPage('r')).frames.map((f) => [f.seq, f.attempt])).toEqual([[0, 1]]);
          await expect(d.retry('r')).rejects.toBeInstanceOf(FencingConflictError); // succeeded: not retried
          await expect(d.retry('ghost')).rejects.toBeInstanceOf(NotFoundError);
          await d.submit('q', bytes('x'), { id: 'c' });
          await d.cancel('c');
          await expect(d.retry('c')).rejects.toBeInstanceOf(FencingConflictError); // cancelled stays cancelled
        },
      );

      unless('retry')('redrive retries a queue’s failed jobs, oldest first, up to its limit, and no other finished job', async () => {
        // A succeeded and a cancelled job come first in submit order: redrive passes over them.
        await d.submit('q', bytes('x'), { id: 's' });
        await d.claim('q', 'w');
        await d.ack('s', 'w', { result: bytes('kept') });
        await d.submit('q', bytes('x'), { id: 'c' });
        await d.cancel('c');
        for (const id of ['f1', 'f2', 'f3']) {
          await d.submit('q', bytes('x'), { id });
          await d.claim('q', 'w');
          await d.nack(id, 'w', { error: 'x', retry: false });
        }
        expect(await d.redrive('q', { limit: 2 })).toEqual([
          { id: 'f1', queue: 'q' },
          { id: 'f2', queue: 'q' },
        ]);
        expect([await d.count('q'), await d.count('q', 'failed')]).toEqual([2, 1]);
        expect(await d.redrive('q', { limit: 10 })).toEqual([{ id: 'f3', queue: 'q' }]);
        expect([(await d.get('s'))!.state, (await d.get('c'))!.state]).toEqual(['succeeded', 'cancelled']);
      });

      it('delete removes one finished job and its frames; a job not finished is refused and unchanged', async () => {
        await d.submit('q', bytes('x'), { id: 'done', key: 'k-done' });
        await d.claim('q', 'w');
        await d.journalAppend('done', null, { kind: 0, seq: 0, body: bytes('frame'), meta: null }, { workerId: 'w' });
        await d.ack('done', 'w', { result: bytes('r') });
        await d.submit('q', bytes('x'), { id: 'waiting' });
        await d.submit('q', bytes('x'), { id: 'held' });
        await d.submit('q', bytes('x'), { id: 'later', delayMs: 60_000 });
        const held = (await d.claim('q', 'w', { kind: 'filo' }))!;
        expect(held.id).toBe('held');
        await d.delete('done');
        expect(await d.get('done')).toBeNull();
        await expect(d.journalPage('done')).rejects.toBeInstanceOf(NotFoundError);
        await expect(d.delete('done')).rejects.toBeInstanceOf(NotFoundError);
        expect(await d.count('q', 'succeeded')).toBe(0);
        for (const id of ['waiting', 'held', 'later']) {
          const before = await d.get(id);
          await expect(d.delete(id)).rejects.toThrow(/only a finished invocation .* can be deleted: cancel it first/);
          await expect(d.delete(id)).rejects.toBeInstanceOf(FencingConflictError);
          expect(await d.get(id)).toEqual(before);
        }
        // The holder of the running job is not disturbed: it acks as before.
        await d.ack('held', 'w');
        expect((await d.get('held'))!.state).toBe('succeeded');
        // Its id and key are free again: a new job, not the old one's answer.
        await d.submit('q', bytes('y'), { id: 'done', key: 'k-done' });
        expect(await d.get('done')).toMatchObject({ state: 'queued', attempt: 0, result: null });
      });

      it('purge deletes a queue’s finished jobs of one state, oldest first, up to its limit, and nothing else', async () => {
        for (const id of ['f1', 'f2', 'f3']) {
          await d.submit('q', bytes('x'), { id });
          await d.claim('q', 'w');
          await d.nack(id, 'w', { error: 'x', retry: false });
        }
        await d.submit('q', bytes('x'), { id: 's' });
        await d.claim('q', 'w');
        await d.ack('s', 'w');
        await d.submit('q', bytes('x'), { id: 'c' });
        await d.cancel('c');
        await d.submit('q', bytes('x'), { id: 'w1' });
        await d.submit('other', bytes('x'), { id: 'o1' });
        await d.claim('other', 'w');
        await d.nack('o1', 'w', { error: 'x', retry: false });
        expect(await d.purge('q', { state: 'failed', limit: 2 })).toBe(2);
        expect([await d.get('f1'), await d.get('f2'), (await d.get('f3'))?.state]).toEqual([null, null, 'failed']);
        expect(await d.purge('q', { state: 'failed' })).toBe(1);
        expect(await d.purge('q', { state: 'failed' })).toBe(0);
        expect([(await d.get('s'))?.state, (await d.get('c'))?.state, (await d.get('w1'))?.state]).toEqual([
          'succeeded',
          'cancelled',
          'queued',
        ]);
        expect((await d.get('o1'))?.state).toBe('failed'); // another queue's
        expect(await d.purge('q', { state: 'cancelled' })).toBe(1);
        expect(await d.purge('q', { state: 'succeeded' })).toBe(1);
        expect([
          await d.count('q', 'failed'),
          await d.count('q', 'succeeded'),
          await d.count('q', 'cancelled'),
          await d.count('q'),
        ]).toEqual([0, 0, 0, 1]);
        await expect(d.purge('q', { state: 'queued' as 'failed' })).rejects.toThrow(/only finished jobs are purged/);
        await expect(d.purge('q', { state: 'failed', limit: 0 })).rejects.toBeInstanceOf(BadRequestError);
        await expect(d.purge('q', { state: 'failed', limit: 1001 })).rejects.toBeInstanceOf(BadRequestError);
        expect((await d.get('w1'))?.state).toBe('queued');
      });

      unless('retry')('a job that fails for good is also submitted to its queue’s dead-letter queue, which redrives it back', async () => {
        await d.configureQueue('q', { deadLetterQueue: 'dlq', maxAttempts: 1 });
        await d.submit('q', bytes('payload'), { id: 'dl' });
        await d.claim('q', 'w');
        await d.nack('dl', 'w', { error: { message: 'bad', type: 'ValueError' } });
        const letter = (await d.claim('dlq', 'repair'))!;
        expect(letter).toMatchObject({ id: 'dead:dl:1', queue: 'dlq' });
        expect(text(letter.envelope)).toBe('payload');
        expect(await d.get('dead:dl:1')).toMatchObject({
          parent: 'dl',
          error: { type: 'AttemptsExhausted', last: { type: 'ValueError' } },
        });
        await d.nack('dead:dl:1', 'repair', { error: 'not yet', retry: true }); // back to waiting in the dead-letter queue
        expect(await d.redrive('dlq', { deadLetters: true })).toEqual([{ id: 'dl', queue: 'q' }]);
        expect(await d.get('dl')).toMatchObject({ state: 'queued' });
        expect(await d.get('dead:dl:1')).toMatchObject({ state: 'cancelled', error: { type: 'Redriven' } });
        expect((await d.claim('q', 'w'))?.id).toBe('dl');
      });
    });

    describe('pause, the running cap, the claim rate', () => {
      it('a paused queue takes submits and hands out nothing; its parked claim wakes on resume', async () => {
        await d.pauseQueue('q');
        expect((await d.queueInfo('q')).paused).toBe(true);
        await d.submit('q', bytes('x'), { id: 'p' });
        expect(await d.claim('q', 'w')).toBeNull();
        const waiting = d.claim('q', 'w', { waitMs: 20_000 });
        await parked('q');
        await d.resumeQueue('q');
        expect((await waiting)?.id).toBe('p');
      });

      it('max_running bounds the running jobs across claims; a claim held back goes when one ends', async () => {
        await d.configureQueue('q', { maxRunning: 2 });
        for (let i = 0; i < 5; i++) await d.submit('q', bytes('x'), { id: `m${i}` });
        expect((await d.claimMany('q', 'a', 5)).map((c) => c.id)).toEqual(['m0', 'm1']);
        expect(await d.claim('q', 'b')).toBeNull();
        const waiting = d.claim('q', 'b', { waitMs: 20_000 });
        await parked('q');
        await d.ack('m0', 'a');
        expect((await waiting)?.id).toBe('m2');
        expect(await d.count('q', 'running')).toBe(2);
        await d.configureQueue('q', { maxRunning: null }); // cleared: no cap
        expect((await d.claimMany('q', 'c', 5)).map((c) => c.id)).toEqual(['m3', 'm4']);
      });

      it('claims_per_second hands out no more than its rate (a second’s worth at once, at least one); claims over it wait', async () => {
        const rate = 1000 / T; // a token every T ms
        await d.configureQueue('q', { claimsPerSecond: rate });
        for (let i = 0; i < 4; i++) await d.submit('q', bytes('x'), { id: `r${i}` });
        expect(await d.claimMany('q', 'w', 4)).toHaveLength(1);
        expect(await d.claim('q', 'w')).toBeNull();
        const t0 = h.now();
        await h.elapse(T);
        const next = await d.claim('q', 'w', { waitMs: 10_000 });
        expect(next?.id).toBe('r1');
        expect(h.now() - t0).toBeGreaterThanOrEqual(T - 5);
        expect((await d.queueInfo('q')).settings.claimsPerSecond).toBeCloseTo(rate);
      });
    });

    describe('TTL', () => {
      it('a job not claimed within its TTL fails as Expired and is never handed out; a queue may set a default', async () => {
        await d.submit('q', bytes('x'), { id: 't', ttlMs: T });
        await d.configureQueue('q2', { ttlMs: T });
        await d.submit('q2', bytes('x'), { id: 't2' });
        await d.submit('q2', bytes('x'), { id: 't3', ttlMs: 100 * T }); // its own TTL wins
        expect((await d.get('t2'))!.expiresAt).not.toBeNull();
        await h.elapse(T + 1);
        expect(await d.claim('q', 'w')).toBeNull();
        expect((await d.claim('q2', 'w'))?.id).toBe('t3');
        await expect(d.result('t')).rejects.toMatchObject({ error: { type: 'Expired' } });
        await expect(d.result('t2')).rejects.toMatchObject({ error: { type: 'Expired' } });
      });
    });

    (lacks.has('schedules') ? describe.skip : describe)('cron schedules', () => {
      it('submits each tick once, keyed by its time; lists next ticks; removes', async () => {
        const s = await d.setSchedule('q', 'every-second', { cron: '* * * * * *', envelope: bytes('tick') });
        expect(s).toMatchObject({ queue: 'q', name: 'every-second', cron: '* * * * * *', timezone: null, lastAt: null });
        expect(s.nextAt).toBeGreaterThan(h.now() - 1_000);
        await until(async () => (await d.count('q')) >= 1, 'a tick submitted', 10_000);
        const job = (await d.claim('q', 'w'))!;
        expect(job.id).toMatch(/^schedule:q:every-second:\d+$/);
        expect(text(job.envelope)).toBe('tick');
        const inv = (await d.get(job.id))!;
        expect(inv.key).toBe(`schedule:every-second:${job.id.split(':').pop()}`);
        expect(Number(job.id.split(':').pop()) % 1000).toBe(0);
        const [listed] = await d.listSchedules('q');
        expect(listed!.lastAt).not.toBeNull();
        await d.removeSchedule('q', 'every-second');
        expect(await d.listSchedules('q')).toEqual([]);
        await expect(d.removeSchedule('q', 'every-second')).rejects.toBeInstanceOf(NotFoundError);
      });

      it('submits only the latest of the ticks missed while the plane looked away', async (ctx) => {
        // Missing ticks takes a plane that looks away for a while: a clock the test can move.
        if (!h.movableClock)
          return ctx.skip('over HTTP the plane’s clock is real time; the engine code is the same as on the local planes');
        await d.setSchedule('q', 'each-second', { cron: '* * * * * *', envelope: bytes('tick') });
        await h.elapse(30_000); // thirty ticks pass unseen
        await until(async () => (await d.count('q')) >= 1, 'the catch-up tick', 10_000);
        await until(async () => (await d.listSchedules('q'))[0]!.nextAt > h.now() - 2_000, 'the schedule moved past now', 10_000);
        expect(await d.count('q')).toBeLessThanOrEqual(2); // the latest missed tick, and perhaps the one after it: not thirty
      });

      it('submits every tick of many schedules due at the same moment, each once, at once', async () => {
        // 250 schedules due at one second of the hour: more than one fire takes (MAX_TICKS_PER_FIRE,
        // src/core/sql/schedules.ts). The rest must fire at once, not at the next tick an hour on.
        // A second a few ahead (the plane's timers run in real time, whatever its clock).
        const at = new Date(Math.ceil((h.now() + (h.movableClock ? 3_500 : 6_000)) / 1000) * 1000);
        const cron = `${at.getUTCSeconds()} ${at.getUTCMinutes()} * * * *`;
        const names = Array.from({ length: 250 }, (_, i) => `s${String(i).padStart(3, '0')}`);
        for (let i = 0; i < names.length; i += 25)
          await Promise.all(names.slice(i, i + 25).map((name) => d.setSchedule('many', name, { cron, envelope: bytes(name) })));
        expect(h.now(), 'the schedules set before their tick').toBeLessThan(at.getTime());
        await until(async () => (await d.count('many')) >= 250, 'every tick submitted', 30_000, 50);
        const ids: string[] = [];
        for (let got = 1; got; ) {
          const jobs = await d.claimMany('many', 'w', 100);
          ids.push(...jobs.map((j) => j.id.split(':')[2]!));
          got = jobs.length;
        }
        expect(ids.sort()).toEqual(names);
      }, 60_000);

      it("a tick's job is told on the feed as any submitted job is", async () => {
        const ac = new AbortController();
        const it = await attachedFeed(d, 'cronfeed', ac.signal);
        await d.setSchedule('cronfeed', 'each-second', { cron: '* * * * * *', envelope: bytes('tick') });
        let tick: FeedItem | undefined;
        for (let i = 0; i < 200 && !tick; i++) {
          const r = await it.next();
          if (r.done) break;
          if (r.value.kind === 'job' && r.value.id.startsWith('schedule:')) tick = r.value;
        }
        ac.abort();
        expect(tick).toMatchObject({
          kind: 'job',
          queue: 'cronfeed',
          status: 'queued',
          attempt: 0,
          id: expect.stringMatching(/^schedule:cronfeed:each-second:\d+$/),
        });
      });

      it('refuses a malformed cron and an unknown time zone', async () => {
        await expect(d.setSchedule('q', 'bad', { cron: 'every day', envelope: bytes('x') })).rejects.toBeInstanceOf(BadRequestError);
        await expect(
          d.setSchedule('q', 'bad', { cron: '0 9 * * *', timezone: 'Mars/Olympus', envelope: bytes('x') }),
        ).rejects.toBeInstanceOf(BadRequestError);
        // Outside the one language every plane reads (src/core/cron.ts): each plane refuses it alike.
        for (const cron of ['0 0 * * FRI-MON', '5/15 * * * *', '0 0 1W * *', '0 0 0 1 1 * 2030', '@reboot']) {
          await expect(d.setSchedule('q', 'bad', { cron, envelope: bytes('x') }), cron).rejects.toBeInstanceOf(BadRequestError);
        }
        await expect(d.setSchedule('q', 'bad', { cron: '0 9 * * *', timezone: '+01:00', envelope: bytes('x') })).rejects.toBeInstanceOf(
          BadRequestError,
        );
        const s = await d.setSchedule('q', 'nine', { cron: '0 9 * * *', timezone: 'europe/berlin', envelope: bytes('x') });
        expect(s.timezone).toBe('Europe/Berlin'); // stored by its canonical name
        expect(Number(new Date(s.nextAt).toLocaleString('en', { timeZone: 'Europe/Berlin', hour: 'numeric', hour12: false }))).toBe(9);
        expect(await d.listSchedules('q')).toHaveLength(1);
      });
    });
  });
}
