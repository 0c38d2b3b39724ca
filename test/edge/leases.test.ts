/** Leases: expiry through the alarm and through claims, attempt limits, restarts, heartbeats. */
import { evictDurableObject, runDurableObjectAlarm, runInDurableObject } from 'cloudflare:test';
import { describe, expect, it } from 'vitest';
import { plane } from './setup/http.ts';
import { dbOf, expireLease, queueStub } from './setup/objects.ts';

describe('leases', () => {
  it('sets the lease from the claim, else the queue setting, else the default', async () => {
    const p = plane();
    await p.configure('q', { lease_ms: 5_000 });
    for (const id of ['a', 'b']) await p.submit('q', id);
    const t0 = Date.now();
    const a = (await p.claim('q', 'w')).body.claimed[0];
    const b = (await p.claim('q', 'w', { lease_ms: 90_000 })).body.claimed[0];
    expect(a.lease_until - t0).toBeGreaterThanOrEqual(4_000);
    expect(a.lease_until - t0).toBeLessThanOrEqual(6_000);
    expect(b.lease_until - t0).toBeGreaterThanOrEqual(89_000);
  });

  it('returns an expired running row to queued through the alarm, so the job is delivered again', async () => {
    const p = plane();
    await p.submit('q', 'a');
    await p.claim('q', 'dead-worker');
    await expireLease(p.ns, 'a');
    expect(await runDurableObjectAlarm(queueStub(p.ns, 'q'))).toBe(true);
    expect((await p.get('a')).body).toMatchObject({ state: 'queued', attempt: 1, lease_until: null });
    expect((await p.claim('q', 'live-worker')).body.claimed[0]).toMatchObject({ id: 'a', attempt: 2 });
  });

  it('fails the row with an error saying why once it used its attempts', async () => {
    const p = plane();
    await p.configure('q', { max_attempts: 2 });
    await p.submit('q', 'a');
    for (let i = 0; i < 2; i++) {
      await p.claim('q', 'w');
      await expireLease(p.ns, 'a');
      await runDurableObjectAlarm(queueStub(p.ns, 'q'));
    }
    const row = (await p.get('a')).body;
    expect(row.state).toBe('failed');
    expect(row.error).toMatchObject({ type: 'AttemptsExhausted', last: { type: 'LeaseExpired' } });
    expect(row.error.message).toBe('the worker stopped answering: its lease expired (attempt 2 of 2, none left)');
    expect((await p.result('a')).body).toMatchObject({
      state: 'failed',
      error: { type: 'AttemptsExhausted', last: { type: 'LeaseExpired' } },
    });
  });

  it('lets a claim reclaim an expired lease itself, without any alarm', async () => {
    const p = plane();
    await p.submit('q', 'a');
    await p.claim('q', 'dead');
    await expireLease(p.ns, 'a');
    await runInDurableObject(queueStub(p.ns, 'q'), (_o, state) => state.storage.deleteAlarm());
    expect((await p.claim('q', 'live')).body.claimed[0]).toMatchObject({ id: 'a', attempt: 2 });
  });

  it('re-arms the alarm when the object starts again after losing it', async () => {
    const p = plane();
    await p.submit('q', 'a');
    await p.claim('q', 'w', { lease_ms: 120_000 });
    const stub = queueStub(p.ns, 'q');
    await runInDurableObject(stub, (_o, state) => state.storage.deleteAlarm());
    await evictDurableObject(stub);
    await stub.stats(); // any request starts it again
    const alarm = await runInDurableObject(stub, (_o, state) => state.storage.getAlarm());
    const lease = (await (
      await dbOf(p.ns)
    )
      .prepare(`SELECT lease_until FROM invocations WHERE ns = ?1 AND id = 'a'`)
      .bind(p.ns)
      .first<{ lease_until: number }>())!.lease_until;
    expect(alarm).toBe(lease);
  });

  it('an evicted object started by its alarm alone knows its queue from its name, and expires its leases', async () => {
    const p = plane();
    await p.submit('q', 'a');
    await p.claim('q', 'dead-worker');
    await expireLease(p.ns, 'a');
    const stub = queueStub(p.ns, 'q');
    await runInDurableObject(stub, (_o, state) => state.storage.setAlarm(Date.now() + 60_000));
    await evictDurableObject(stub);
    // The alarm is the first thing to reach the new instance: no request told it which queue it serves.
    expect(await runDurableObjectAlarm(stub)).toBe(true);
    expect((await p.get('a')).body).toMatchObject({ state: 'queued', attempt: 1, lease_until: null });
    await runInDurableObject(stub, (o) => expect([o.ns, o.queue]).toEqual([p.ns, 'q']));
  });

  it('extends the lease on heartbeat and tells the holder when its job was cancelled', async () => {
    const p = plane();
    await p.submit('q', 'a');
    const c = (await p.claim('q', 'w', { lease_ms: 1_000 })).body.claimed[0];
    const hb = await p.heartbeat('a', 'w', { attempt: c.attempt, lease_ms: 60_000 });
    expect(hb.body.cancelled).toBe(false);
    expect(hb.body.lease_until).toBeGreaterThan(c.lease_until);
    expect((await p.cancel('a')).body).toEqual({ cancelled: true });
    expect((await p.heartbeat('a', 'w', { attempt: c.attempt })).body).toEqual({ lease_until: null, cancelled: true });
    expect((await p.heartbeat('a', 'someone-else')).status).toBe(409);
    expect((await p.ack('a', 'w')).status).toBe(409); // a cancelled job's ack changes nothing
    expect((await p.get('a')).body.state).toBe('cancelled');
  });

  it('expiry vs ack: when the sweep and an ack land together one wins cleanly, and terminal rows never move back', async () => {
    const p = plane();
    const outcomes = new Map<string, number>();
    for (let i = 0; i < 20; i++) {
      const id = `race${i}`;
      await p.submit('q', id);
      const c = (await p.claim('q', 'w')).body.claimed[0];
      await expireLease(p.ns, id);
      const [ack] = await Promise.all([p.ack(id, 'w', { attempt: c.attempt }), runDurableObjectAlarm(queueStub(p.ns, 'q'))]);
      const row = (await p.get(id)).body;
      if (ack.status === 200) expect(row.state).toBe('succeeded');
      else {
        expect(ack.status).toBe(409);
        expect(row.state).toBe('queued');
      }
      outcomes.set(`${ack.status}/${row.state}`, (outcomes.get(`${ack.status}/${row.state}`) ?? 0) + 1);
      // Whatever happened, a later sweep leaves a terminal row where it is.
      await runDurableObjectAlarm(queueStub(p.ns, 'q'));
      if (row.state === 'succeeded') expect((await p.get(id)).body.state).toBe('succeeded');
      else await p.cancel(id);
    }
    expect([...outcomes.keys()].every((k) => k === '200/succeeded' || k === '409/queued')).toBe(true);
  });
});
