/**
 * A queue object that pushes stays awake while it has work on its way (pushing.ts, KEEP_AWAKE_MS).
 * Cloudflare evicts an object with no request or alarm for 70-140 s, and a fetch on its way does
 * not count before the compatibility date 2026-10-01: so while a delivery is out, or jobs wait for
 * the claim rate, its alarm fires every 30 s at most, each time armed again; idle, it stops.
 * The runtime here never evicts an idle object by itself: what is tested is the alarm that keeps
 * it awake where one does.
 */
import { env } from 'cloudflare:workers';
import { runDurableObjectAlarm, runInDurableObject } from 'cloudflare:test';
import { describe, expect, it } from 'vitest';
import { KEEP_AWAKE_MS } from '../../src/durable/pushing.ts';
import { until } from '../support/wait.ts';
import { call, plane } from './setup/http.ts';
import { queueStub } from './setup/objects.ts';

/** The push hooks' control routes (vitest.edge.config.ts): held/KEY, release/KEY. */
const hooks = async (path: string) =>
  (await (env as unknown as { PUSH_TEST_HOOKS: Fetcher }).PUSH_TEST_HOOKS.fetch(`https://hooks/${path}`)).json<Record<string, boolean>>();

/** The object's alarm, as its storage holds it. */
const alarmOf = (stub: DurableObjectStub) => runInDurableObject(stub, (_o, state) => state.storage.getAlarm());

/**
 * Waits until the object's alarm is set ahead and not due now: a job that finishes arms one at
 * once (its queue's retention pass), which the runtime runs by itself, racing a test that runs it.
 */
async function alarmAhead(stub: DurableObjectStub, what: string): Promise<number> {
  let at: number | null = null;
  await until(async () => (at = await alarmOf(stub)) !== null && at > Date.now() + 1_000, `an alarm set ahead, ${what}`);
  return at!;
}

/** Runs the object's alarm, then expects another within KEEP_AWAKE_MS. */
async function awakeAfterAlarm(stub: DurableObjectStub, what: string) {
  await alarmAhead(stub, what);
  expect(await runDurableObjectAlarm(stub), what).toBe(true);
  const at = await alarmOf(stub);
  expect(at, what).not.toBeNull();
  expect(at!, what).toBeLessThanOrEqual(Date.now() + KEEP_AWAKE_MS);
}

/** Runs the object's alarm (set ahead, so the runtime does not run it first), then expects none within KEEP_AWAKE_MS. */
async function idleAfterAlarm(stub: DurableObjectStub) {
  await runInDurableObject(stub, (_o, state) => state.storage.setAlarm(Date.now() + 60_000));
  expect(await runDurableObjectAlarm(stub)).toBe(true);
  const at = await alarmOf(stub);
  expect(at === null || at > Date.now() + KEEP_AWAKE_MS, `alarm at ${at}`).toBe(true);
}

describe('a pushing queue object stays awake while it has work on its way', () => {
  it('while a delivery is out, however long its receiver takes', async () => {
    const p = plane();
    const key = p.ns;
    // Its lease outlasts the 5-minute timeout: left to the lease, the next alarm would be 305 s away.
    await p.configure('q', { push: { url: `service://PUSH_TEST_HOOKS/hold/${key}`, timeout_ms: 300_000 } });
    const stub = queueStub(p.ns, 'q');
    expect((await p.submit('q', 'slow')).status).toBe(201);
    await until(async () => (await hooks(`held/${key}`)).held === true, 'the delivery to reach its receiver');
    const at = await alarmOf(stub);
    expect(at).not.toBeNull();
    expect(at!).toBeLessThanOrEqual(Date.now() + KEEP_AWAKE_MS);
    for (let i = 0; i < 3; i++) await awakeAfterAlarm(stub, `alarm ${i + 1} with the delivery out`);
    expect((await hooks(`release/${key}`)).released).toBe(true);
    expect((await p.result('slow', 10_000)).body.state).toBe('succeeded');
    await idleAfterAlarm(stub);
  });

  it("while its jobs wait for the claim rate's next token, and not while it is paused", async () => {
    const p = plane();
    // A token each 100 s: the second job waits that long, with nothing on its way.
    await p.configure('q', { claims_per_second: 0.01, push: { url: 'service://PUSH_TEST_HOOKS/now' } });
    const stub = queueStub(p.ns, 'q');
    for (const id of ['a', 'b']) expect((await p.submit('q', id)).status).toBe(201);
    expect((await p.result('a', 10_000)).body.state).toBe('succeeded');
    for (let i = 0; i < 2; i++) await awakeAfterAlarm(stub, `alarm ${i + 1} with b queued`);
    expect((await p.get('b')).body.state).toBe('queued');
    // Paused, nothing is claimed whatever the rate: a resume, a request, wakes it.
    await call('POST', `/v1/ns/${p.ns}/queues/q/pause`);
    await idleAfterAlarm(stub);
    await call('POST', `/v1/ns/${p.ns}/queues/q/resume`);
    // No rate: b goes at once, and then nothing keeps the object awake.
    expect((await p.configure('q', { claims_per_second: null })).status).toBe(200);
    expect((await p.result('b', 10_000)).body.state).toBe('succeeded');
    await idleAfterAlarm(stub);
  });
});
