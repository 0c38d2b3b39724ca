/**
 * The queue object's alarm drives delays, TTLs and schedules, as it drives leases: it is armed for
 * the earliest of them, re-armed when an evicted object starts again, and does their work when it
 * fires. (The behaviours themselves are in test/conformance/scheduling.ts, on every plane.)
 */
import { evictDurableObject, runDurableObjectAlarm, runInDurableObject } from 'cloudflare:test';
import { describe, expect, it } from 'vitest';
import { b64, call, plane } from './setup/http.ts';
import { dbOf, queueStub } from './setup/objects.ts';

const alarmOf = (stub: ReturnType<typeof queueStub>) => runInDurableObject(stub, (_o, state) => state.storage.getAlarm());

/** Loses the object's alarm and the object itself; any request then starts a new instance. */
async function loseAlarmAndEvict(stub: ReturnType<typeof queueStub>) {
  await runInDurableObject(stub, (_o, state) => state.storage.deleteAlarm());
  await evictDurableObject(stub);
  await stub.stats();
}

describe('the alarm drives delays, TTLs and schedules', () => {
  it('is armed for the earliest delayed job, and re-armed for it when the object starts again', async () => {
    const p = plane();
    await p.submit('q', 'late', { delay_ms: 600_000 });
    await p.submit('q', 'early', { delay_ms: 300_000 });
    const stub = queueStub(p.ns, 'q');
    const due = (await p.get('early')).body.run_at;
    expect(await alarmOf(stub)).toBe(due);
    await loseAlarmAndEvict(stub);
    expect(await alarmOf(stub)).toBe(due);
  });

  it('is armed for the earliest TTL and for the next tick of a schedule, across a restart too', async () => {
    const p = plane();
    await p.submit('q', 'ttl', { ttl_ms: 400_000 });
    const stub = queueStub(p.ns, 'q');
    expect(await alarmOf(stub)).toBe((await p.get('ttl')).body.expires_at);
    const s = await call('PUT', `/v1/ns/${p.ns}/queues/q2/schedules/hourly`, { cron: '0 * * * *', envelope: b64('tick') });
    expect(s.status).toBe(200);
    const stub2 = queueStub(p.ns, 'q2');
    expect(await alarmOf(stub2)).toBe(s.body.next_at);
    await loseAlarmAndEvict(stub2);
    expect(await alarmOf(stub2)).toBe(s.body.next_at);
  });

  it('when it fires, promotes the due jobs and wakes nothing early', async () => {
    const p = plane();
    await p.submit('q', 'a', { delay_ms: 300_000 });
    await p.submit('q', 'b', { delay_ms: 600_000 });
    // Bring `a` due, as time passing would, around the object; then let its alarm fire.
    await (await dbOf(p.ns)).prepare(`UPDATE invocations SET run_at = 1 WHERE ns = ?1 AND id = 'a'`).bind(p.ns).run();
    const stub = queueStub(p.ns, 'q');
    await runInDurableObject(stub, (o) => o.forgetHints());
    expect(await runDurableObjectAlarm(stub)).toBe(true);
    expect((await p.get('a')).body.state).toBe('queued');
    expect((await p.get('b')).body.state).toBe('delayed');
    expect(await alarmOf(stub)).toBe((await p.get('b')).body.run_at);
  });

  it('survives a schedule it cannot read: the others fire, and the bad one stops ticking', async () => {
    const p = plane();
    // Yearly, made due below: no tick of its own comes while the test looks (one a second could).
    await call('PUT', `/v1/ns/${p.ns}/queues/q/schedules/good`, { cron: '0 0 1 1 *', envelope: b64('tick') });
    // A row no plane can read (as a corrupted or hand-edited one would be), due now beside the good one.
    await (await dbOf(p.ns))
      .prepare(`INSERT INTO schedules (ns, queue, name, cron, envelope, priority, next_at, created_at, updated_at)
      VALUES (?1, 'q', 'bad', 'not a cron', X'00', 0, 1, 1, 1)`)
      .bind(p.ns)
      .run();
    await (await dbOf(p.ns)).prepare(`UPDATE schedules SET next_at = 1 WHERE ns = ?1 AND name = 'good'`).bind(p.ns).run();
    const stub = queueStub(p.ns, 'q');
    await runInDurableObject(stub, (o) => o.forgetHints());
    expect(await runDurableObjectAlarm(stub)).toBe(true);
    expect((await p.count('q')).body.count).toBe(1); // the good schedule's tick
    const listed = (await call('GET', `/v1/ns/${p.ns}/queues/q/schedules`)).body.schedules as { name: string; next_at: number }[];
    expect(listed.find((x) => x.name === 'bad')!.next_at).toBe(Number.MAX_SAFE_INTEGER);
    expect(listed.find((x) => x.name === 'good')!.next_at).toBeGreaterThan(Date.now() - 5_000);
    expect(await alarmOf(stub)).not.toBe(1);
  });
});
