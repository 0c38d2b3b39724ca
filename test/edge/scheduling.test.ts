/**
 * The queue object's alarm drives delays, TTLs and schedules, as it drives leases: it is armed for
 * the earliest of them, re-armed when an evicted object starts again, and does their work when it
 * fires. (The behaviours themselves are in test/conformance/scheduling.ts, on every plane.)
 */
import { env } from 'cloudflare:workers';
import { evictDurableObject, runDurableObjectAlarm, runInDurableObject } from 'cloudflare:test';
import { describe, expect, it } from 'vitest';
import { b64, call, plane } from './setup/http.ts';
import { queueStub } from './setup/objects.ts';

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
    await env.DB.prepare(`UPDATE invocations SET run_at = 1 WHERE ns = ?1 AND id = 'a'`).bind(p.ns).run();
    const stub = queueStub(p.ns, 'q');
    await runInDurableObject(stub, (o) => o.forgetHints());
    expect(await runDurableObjectAlarm(stub)).toBe(true);
    expect((await p.get('a')).body.state).toBe('queued');
    expect((await p.get('b')).body.state).toBe('delayed');
    expect(await alarmOf(stub)).toBe((await p.get('b')).body.run_at);
  });
});
