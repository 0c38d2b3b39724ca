/** The six design rules, each a named regression test against real workerd, D1 and Durable Objects. */
import { describe, expect, it } from 'vitest';
import { b64, call, plane, unb64 } from './setup/http.ts';
import { dbOf, expireLease, frameCount, queueStub, rows } from './setup/objects.ts';
import { runDurableObjectAlarm, runInDurableObject } from 'cloudflare:test';

describe('rule 1: one row per invocation', () => {
  it('keeps queue entry, metadata, state and result in a single row through its whole life', async () => {
    const p = plane();
    await p.submit('q', 'a', { key: 'k1', priority: 2, parent: 'root' });
    await p.submit('q', 'a', { key: 'k1' });
    await p.claim('q', 'w');
    await p.append('a', 'w', { seq: 0 });
    await p.nack('a', 'w', { retry: true });
    await p.claim('q', 'w');
    await p.ack('a', 'w', { result: b64('done') });
    const all = await rows(p.ns);
    expect(all).toHaveLength(1);
    const got = (await p.get('a')).body;
    expect(got).toMatchObject({
      id: 'a',
      queue: 'q',
      key: 'k1',
      priority: 2,
      parent: 'root',
      state: 'succeeded',
      attempt: 2,
      worker_id: 'w',
    });
    expect(unb64(got.result)).toBe('done');
    expect(unb64(got.envelope)).toBe('env-a');
  });
});

describe('rule 2: every transition is one guarded atomic update', () => {
  it('answers a transition from the wrong state with a clean miss that changes nothing', async () => {
    const p = plane();
    await p.submit('q', 'a');
    const before = await rows(p.ns);
    expect((await p.ack('a', 'w')).status).toBe(409); // queued, not running
    expect((await p.heartbeat('a', 'w')).status).toBe(409);
    expect(await rows(p.ns)).toEqual(before);
    await p.claim('q', 'w');
    await p.ack('a', 'w');
    expect((await p.cancel('a')).body).toEqual({ cancelled: false }); // terminal rows never move
    expect((await p.nack('a', 'w')).status).toBe(409);
    expect((await p.get('a')).body.state).toBe('succeeded');
  });

  it('gives 50 concurrent claims on 10 jobs exactly 10 winners and no job twice', async () => {
    const p = plane();
    for (let i = 0; i < 10; i++) await p.submit('q', `j${i}`);
    const answers = await Promise.all(Array.from({ length: 50 }, (_, i) => p.claim('q', `w${i}`)));
    const won = answers.flatMap((a) => a.body.claimed.map((c: { id: string }) => c.id));
    expect(won).toHaveLength(10);
    expect(new Set(won).size).toBe(10);
    expect((await p.count('q', 'running')).body.count).toBe(10);
  });
});

describe('rule 3: fencing', () => {
  it('refuses every write of a stale worker once its job was re-dispatched, and changes nothing', async () => {
    const p = plane();
    await p.submit('q', 'a');
    const first = (await p.claim('q', 'A', { lease_ms: 60_000 })).body.claimed[0];
    await expireLease(p.ns, 'a');
    expect(await runDurableObjectAlarm(queueStub(p.ns, 'q'))).toBe(true);
    const second = (await p.claim('q', 'B')).body.claimed[0];
    expect(second).toMatchObject({ id: 'a', attempt: 2 });
    const before = await rows(p.ns);
    for (const r of [
      await p.ack('a', 'A', { attempt: first.attempt, result: b64('stale') }),
      await p.nack('a', 'A', { attempt: first.attempt }),
      await p.heartbeat('a', 'A', { attempt: first.attempt }),
      await p.append('a', 'A', { attempt: first.attempt, seq: 0 }),
      // Naming no attempt, or the current holder's: the worker id alone tells A from B.
      await p.ack('a', 'A', { result: b64('stale') }),
      await p.ack('a', 'A', { attempt: second.attempt, result: b64('stale') }),
      await p.heartbeat('a', 'A', { attempt: second.attempt }),
    ]) {
      expect(r.status).toBe(409);
      expect(r.body.error.code).toBe('conflict');
    }
    const many = await call('POST', `/v1/ns/${p.ns}/queues/q/ack`, {
      items: [{ id: 'a', worker_id: 'A', attempt: second.attempt, result: b64('stale') }],
    });
    expect(many.body.results[0].error.code).toBe('conflict');
    expect(await rows(p.ns)).toEqual(before);
    expect(await frameCount(p.ns, 'a')).toBe(0);
    expect((await p.ack('a', 'B', { attempt: 2 })).status).toBe(200);
  });

  it("fences the same worker id on an older attempt when the attempt is sent, alone or in a batch, and the row stays the new attempt's", async () => {
    const p = plane();
    await p.submit('q', 'a');
    await p.claim('q', 'W');
    await expireLease(p.ns, 'a');
    await p.claim('q', 'W'); // the same worker id re-claims: attempt 2
    const before = await rows(p.ns);
    expect(before[0]).toMatchObject({ state: 'running', attempt: 2, result: '' }); // hex(NULL) is ''
    expect((await p.ack('a', 'W', { attempt: 1, result: b64('stale') })).status).toBe(409);
    const many = await call('POST', `/v1/ns/${p.ns}/queues/q/ack`, {
      items: [{ id: 'a', worker_id: 'W', attempt: 1, result: b64('stale') }],
    });
    expect(many.body.results[0].error.code).toBe('conflict');
    const withClaim = await p.claim('q', 'W', { acks: [{ id: 'a', attempt: 1, result: b64('stale') }] });
    expect(withClaim.body.acks[0].error.code).toBe('conflict');
    expect(await rows(p.ns)).toEqual(before);
    expect((await p.ack('a', 'W', { attempt: 2, result: b64('fresh') })).status).toBe(200);
    expect(unb64((await p.get('a')).body.result)).toBe('fresh');
  });

  it('refuses every write of a worker whose lease ran out before any sweep moved its row, and changes nothing', async () => {
    const p = plane();
    await p.submit('q', 'a');
    await p.submit('q', 'b');
    const [a] = (await p.claim('q', 'W', { lease_ms: 60_000 })).body.claimed;
    await p.append('a', 'W', { attempt: a.attempt, seq: 0 });
    await expireLease(p.ns, 'a'); // its lease is in the past; no alarm has run
    const before = await rows(p.ns);
    expect(before[0]).toMatchObject({ id: 'a', state: 'running', worker_id: 'W', attempt: 1 });
    for (const r of [
      await p.ack('a', 'W', { attempt: a.attempt, result: b64('late') }),
      await p.ack('a', 'W', { result: b64('late') }), // the worker id alone
      await p.nack('a', 'W', { attempt: a.attempt, retry: false }),
      await p.heartbeat('a', 'W', { attempt: a.attempt, lease_ms: 60_000 }),
      await p.append('a', 'W', { attempt: a.attempt, seq: 1 }),
    ]) {
      expect(r.status).toBe(409);
      expect(r.body.error.message).toMatch(/lease of attempt 1 of invocation "a" ran out/);
    }
    const many = await call('POST', `/v1/ns/${p.ns}/queues/q/ack`, {
      items: [{ id: 'a', worker_id: 'W', attempt: a.attempt, result: b64('late') }],
    });
    expect(many.body.results[0].error.code).toBe('conflict');
    expect(await rows(p.ns)).toEqual(before);
    expect(await frameCount(p.ns, 'a')).toBe(1);
    // The sweep then puts it back, and the next claim takes it as attempt 2.
    expect(await runDurableObjectAlarm(queueStub(p.ns, 'q'))).toBe(true);
    expect((await p.claim('q', 'V')).body.claimed[0]).toMatchObject({ id: 'a', attempt: 2 });
  });
});

describe('rule 4: idempotent submit', () => {
  it('answers a resubmit with the same key with the existing invocation, and stores one row', async () => {
    const p = plane();
    const a = await p.submit('q', 'first', { key: 'order-17' });
    const b = await p.submit('q', 'second', { key: 'order-17' });
    expect(a.status).toBe(201);
    expect(b.status).toBe(200);
    expect(b.body).toEqual({ id: 'first', created: false });
    expect(await rows(p.ns)).toHaveLength(1);
  });

  it('scopes keys per queue and ids per namespace', async () => {
    const p = plane();
    expect((await p.submit('q1', 'a', { key: 'k' })).status).toBe(201);
    expect((await p.submit('q2', 'b', { key: 'k' })).status).toBe(201); // same key, other queue
    expect((await p.submit('q1', 'a')).body).toEqual({ id: 'a', created: false }); // a retry
    const clash = await p.submit('q2', 'a');
    expect(clash.status).toBe(409);
    expect(clash.body.error.message).toMatch(/another queue/);
    const other = plane();
    expect((await other.submit('q1', 'a', { key: 'k' })).status).toBe(201); // other namespace
  });
});

describe('rule 5: counts come from the same rows', () => {
  it("counts each state exactly as the rows hold it, and a sampled queue's level counts agree", async () => {
    const p = plane();
    for (let i = 0; i < 12; i++) await p.submit('q', `j${i}`, { priority: i % 3 });
    for (let i = 0; i < 2; i++) await p.claim('q', 'w');
    // The first boltzmann claim recounts the queue's levels; from then on the triggers keep them.
    expect((await p.claim('q', 'w', { kind: 'boltzmann' })).body.claimed).toHaveLength(1);
    for (let i = 0; i < 4; i++) await p.claim('q', 'w');
    for (let i = 12; i < 15; i++) await p.submit('q', `j${i}`, { priority: 7 });
    const running = (await rows(p.ns)).filter((r) => r.state === 'running').map((r) => String(r.id));
    await p.ack(running[0]!, 'w');
    await p.nack(running[1]!, 'w', { retry: false });
    await p.nack(running[2]!, 'w', { retry: true });
    await p.cancel(running[3]!);
    const all = await rows(p.ns);
    for (const state of ['queued', 'running', 'succeeded', 'failed', 'cancelled']) {
      expect((await p.count('q', state)).body.count, state).toBe(all.filter((r) => r.state === state).length);
    }
    const levels = await (await dbOf(p.ns))
      .prepare(`SELECT priority, queued FROM queue_levels WHERE ns = ?1 AND queue = 'q' AND queued > 0 ORDER BY priority`)
      .bind(p.ns)
      .all();
    const truth = await (await dbOf(p.ns))
      .prepare(
        `SELECT priority, count(*) AS queued FROM invocations WHERE ns = ?1 AND queue = 'q' AND state = 'queued' GROUP BY priority ORDER BY priority`,
      )
      .bind(p.ns)
      .all();
    expect(levels.results).toEqual(truth.results);
  });

  it("keeps a sampled queue's level counts through every path that inserts: set submits (made, repeated, delayed), a lone repeat, dead letters, schedule ticks", async () => {
    const p = plane();
    const levels = async (queue: string) =>
      (
        await (
          await dbOf(p.ns)
        )
          .prepare(`SELECT priority, queued FROM queue_levels WHERE ns = ?1 AND queue = ?2 AND queued > 0 ORDER BY priority`)
          .bind(p.ns, queue)
          .all()
      ).results;
    const truth = async (queue: string) =>
      (
        await (
          await dbOf(p.ns)
        )
          .prepare(
            `SELECT priority, count(*) AS queued FROM invocations WHERE ns = ?1 AND queue = ?2 AND state = 'queued' GROUP BY priority ORDER BY priority`,
          )
          .bind(p.ns, queue)
          .all()
      ).results;
    const many = (items: Record<string, unknown>[]) =>
      call('POST', `/v1/ns/${p.ns}/queues/q/invocations/batch`, { items: items.map((it) => ({ envelope: b64('m'), ...it })) });
    expect((await p.configure('q', { dead_letter_queue: 'dlq' })).status).toBe(200);
    await p.submit('q', 'first', { priority: 1 });
    await p.submit('dlq', 'd0');
    for (const q of ['q', 'dlq']) expect((await p.claim(q, 'w', { kind: 'boltzmann' })).body.claimed).toHaveLength(1); // both sampled from here on
    // A set: two levels, one delayed item, one repeat of a made id (answered, not made again).
    const made = await many([
      { id: 'a', priority: 1 },
      { id: 'b', priority: 2 },
      { id: 'c', priority: 2, delay_ms: 60_000 },
      { id: 'd', priority: 1 },
    ]);
    expect(made.body.results.map((r: { created: boolean }) => r.created)).toEqual([true, true, true, true]);
    const again = await many([
      { id: 'e', priority: 2 },
      { id: 'a', priority: 1 },
      { id: 'f', priority: 3, key: 'k' },
      { id: 'g', priority: 3, key: 'k' },
    ]);
    expect(again.body.results.map((r: { id: string; created: boolean }) => [r.id, r.created])).toEqual([
      ['e', true],
      ['a', false],
      ['f', true],
      ['f', false],
    ]);
    expect((await p.submit('q', 'e', { priority: 2 })).body).toEqual({ id: 'e', created: false }); // a lone repeat
    expect(await levels('q')).toEqual(await truth('q'));
    // A dead letter: the failed job's copy lands queued in the sampled dead-letter queue.
    const claimed = (await p.claim('q', 'w2')).body.claimed[0].id as string;
    expect((await p.nack(claimed, 'w2', { retry: false })).status).toBe(200);
    expect((await p.count('dlq')).body.count).toBe(1);
    expect(await levels('dlq')).toEqual(await truth('dlq'));
    // A schedule's tick, made due now. Its cron is yearly, so no tick of its own comes meanwhile:
    // one every second could fire between the alarm's run here and its re-arming, or between the
    // two reads compared below.
    await call('PUT', `/v1/ns/${p.ns}/queues/q/schedules/every`, { cron: '0 0 1 1 *', envelope: b64('tick'), priority: 9 });
    await (await dbOf(p.ns)).prepare(`UPDATE schedules SET next_at = 1 WHERE ns = ?1 AND name = 'every'`).bind(p.ns).run();
    const stub = queueStub(p.ns, 'q');
    await runInDurableObject(stub, (o) => o.forgetHints());
    expect(await runDurableObjectAlarm(stub)).toBe(true);
    expect((await truth('q')).some((r) => r.priority === 9)).toBe(true);
    expect(await levels('q')).toEqual(await truth('q'));
  });

  it('a queue only ever claimed fifo writes no level counts: 7 D1 rows per job (submit, claim, ack; one of them the finished-jobs index entry that bounds listing and retention)', async () => {
    const p = plane();
    await p.submit('q', 'warm');
    await p.claim('q', 'w');
    const stub = queueStub(p.ns, 'q');
    const before = await stub.stats();
    for (let i = 0; i < 5; i++) {
      await p.submit('q', `j${i}`);
      expect((await p.claim('q', 'w')).body.claimed).toHaveLength(1);
      expect((await p.ack(`j${i}`, 'w', { result: b64('r') })).status).toBe(200);
    }
    const after = await stub.stats();
    const perJob = (after.written - before.written) / 5;
    console.log(`D1 rows written per job (fifo): ${perJob}`);
    expect(perJob).toBeLessThanOrEqual(7);
  });
});

describe('rule 6: the journal is derived, and a trim degrades to the row', () => {
  it('answers reads after a trim from the remaining frames and the row’s terminal result', async () => {
    const p = plane();
    await p.submit('q', 'a');
    await p.claim('q', 'w');
    for (let s = 0; s < 5; s++) await p.append('a', 'w', { seq: s, body: b64(`v${s}`) });
    await p.ack('a', 'w', { result: b64('final') });
    expect((await p.trim('a', 2)).body).toEqual({ trimmed: 3 });
    expect(await frameCount(p.ns, 'a')).toBe(2);
    const page = (await p.read('a', -1)).body;
    expect(page.frames.map((f: { seq: number }) => f.seq)).toEqual([3, 4]);
    expect(page).toMatchObject({ trimmed_before: 2, done: true, state: 'succeeded' }); // the highest seq removed
    expect(unb64(page.outcome.result)).toBe('final');
    expect((await p.trim('a', 0)).body).toEqual({ trimmed: 2 });
    const empty = (await p.read('a', 1)).body;
    expect(empty.frames).toEqual([]);
    expect(empty.outcome.state).toBe('succeeded');
    expect(unb64((await p.result('a')).body.result)).toBe('final'); // the row is untouched
  });
});
