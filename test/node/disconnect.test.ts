/**
 * A claim whose client went away takes no job (src/worker/long-poll.ts): on the one-workerd plane
 * `npm start` serves and on `wrangler dev`, a claim whose client was SIGKILLed while it waited, and
 * a worker stopped with SIGTERM while its claim waited, leave the next job to a live worker.
 */
import { spawn } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inject } from 'vitest';
import { HttpDispatch } from '../../client/local/index.ts';
import { newToken, startPlane } from '../../scripts/plane.mjs';
import { tempDir } from '../support/tmp.ts';
import { until, work } from '../support/wait.ts';
import { HANDLERS, start, stop } from './setup/cli.ts';
import { bytes, freshNs } from './setup/client.ts';

/** How soon a live worker must have the job after the submit. */
const WITHIN_MS = 1_000;

interface Target {
  url: string;
  token: string;
}

const targets: [string, () => Target][] = [];
let served: Awaited<ReturnType<typeof startPlane>> | undefined;
const npmStart: Target = { url: '', token: newToken('lsk_test_') };
targets.push(
  ['npm start (one workerd)', () => npmStart],
  ['wrangler dev', () => ({ url: inject('planeUrl'), token: inject('planeToken') })],
);

beforeAll(async () => {
  served = await startPlane({
    node: process.execPath,
    env: process.env,
    persistTo: tempDir('lakeshore-disconnect-'),
    vars: { LAKESHORE_TOKEN: npmStart.token },
    server: 'miniflare',
  });
  npmStart.url = served.url;
});
afterAll(async () => {
  await served?.stop();
});

/** The queue object's stats: claims parked right now, claims that reached it, and D1 batches it has run. */
async function stats(t: Target, ns: string, queue: string): Promise<{ waiters: number; claims: number; batches: number }> {
  const res = await fetch(`${t.url}/v1/ns/${ns}/queues/${queue}/stats`, { headers: { authorization: `Bearer ${t.token}` } });
  return (await res.json()) as { waiters: number; claims: number; batches: number };
}

/** Claims parked in the queue's object right now. */
const parked = async (t: Target, ns: string, queue: string): Promise<number> => (await stats(t, ns, queue)).waiters;

/** A live worker's claim is waiting; then a submit: answers how long the job took to reach it, and the job. */
async function submitToLiveWorker(d: HttpDispatch, t: Target, queue: string, id: string, before: number) {
  const c0 = (await stats(t, d.namespace, queue)).claims;
  // A stats body without a claim count would leave the clause below that reads it inert.
  expect(Number.isInteger(c0)).toBe(true);
  const live = d.claim(queue, 'live', { waitMs: 5_000 });
  // `before` counts a doomed claim the plane may not have noticed yet. If it notices now, the
  // count drops below `before` first (seen as fewer): then the live claim alone makes it 1 again.
  // Between two looks it may also leave as the live claim parks, the count 1 throughout: the
  // object's count of claims that reached it tells that the live one arrived. (It may park
  // without a D1 batch: a claim on a queue its last claim drained parks first. One still looking
  // when the submit comes finds nothing, parks, and is handed the job by the submit's batch.)
  let left = false;
  await until(
    async () => {
      const s = await stats(t, d.namespace, queue);
      if (s.waiters < before) left = true;
      return s.waiters > before || ((left || s.claims > c0) && s.waiters >= 1);
    },
    'the live claim to park',
    10_000,
  );
  const t0 = Date.now();
  await d.submit(queue, bytes('x'), { id });
  const job = await live;
  return { ms: Date.now() - t0, job };
}

describe.each(targets)('on %s', (name, target) => {
  it('a claim whose client was killed while it waited takes no job: 20 rounds, a live worker has each job within 1 s', async (ctx) => {
    if (name === 'wrangler dev') {
      // wrangler dev answers through its own proxy (a Durable Object that fetches the Worker and
      // does not pass a client's disconnect on), so the Worker cannot learn that the client left;
      // the job comes back after its lease there. On `npm start` and on Cloudflare it does learn.
      ctx.skip();
    }
    const t = target();
    const d = new HttpDispatch(t.url, { token: t.token, namespace: freshNs() });
    const times: number[] = [];
    for (let round = 0; round < 20; round++) {
      // The dying client is a process of its own, with nothing of lakeshore's: a plain fetch, as curl would.
      const claim = `fetch(${JSON.stringify(`${t.url}/v1/ns/${d.namespace}/queues/q/claim`)}, { method: 'POST', headers: { authorization: 'Bearer ${t.token}', 'content-type': 'application/json' }, body: JSON.stringify({ worker_id: 'doomed', wait_ms: 20000 }) }).then((r) => r.text())`;
      const child = spawn(process.execPath, ['-e', claim], { stdio: 'ignore' });
      await until(async () => (await parked(t, d.namespace, 'q')) === 1, 'the doomed claim to park');
      child.kill('SIGKILL');
      await new Promise((r) => child.once('exit', r));
      // Some rounds submit before the plane has noticed the death (the doomed claim is first in
      // line and takes the job; its answer's tail then fails and the job goes back), some after.
      if (round % 2) await until(async () => (await parked(t, d.namespace, 'q')) === 0, 'the doomed claim to leave');
      const { ms, job } = await submitToLiveWorker(d, t, 'q', `j${round}`, round % 2 ? 0 : 1);
      expect(job?.id).toBe(`j${round}`);
      times.push(ms);
      await d.ack(job!.id, 'live');
    }
    console.log(
      `${name}: a killed client's claim, then a submit: the live worker had the job in max ${Math.max(...times)} ms, median ${times.sort((a, b) => a - b)[10]} ms`,
    );
    expect(Math.max(...times)).toBeLessThanOrEqual(WITHIN_MS);
    await d.close();
  }, 120_000);

  it('a worker stopped with SIGTERM while its claim waited takes no job: another worker has it within 1 s', async () => {
    const t = target();
    const ns = freshNs();
    const d = new HttpDispatch(t.url, { token: t.token, namespace: ns });
    const env = { ...process.env, LAKESHORE_URL: t.url, LAKESHORE_TOKEN: t.token, LAKESHORE_NAMESPACE: ns };
    const w = start(['worker', 'start', '--queue', 'q', '--module', HANDLERS], env);
    await until(async () => (await parked(t, ns, 'q')) >= 1, 'the worker to park a claim');
    await stop(w, 'SIGTERM');
    expect(w.child.exitCode).toBe(0);
    const { ms, job } = await submitToLiveWorker(d, t, 'q', 'after-stop', 0);
    expect(job?.id).toBe('after-stop');
    expect(job?.attempt).toBe(1); // the stopped worker's claim never took it
    console.log(`${name}: a SIGTERMed worker's claim, then a submit: the live worker had the job in ${ms} ms`);
    expect(ms).toBeLessThanOrEqual(WITHIN_MS);
    await d.close();
  }, 60_000);

  it('a client that stays keeps what its waiting claim was answered; an aborted claim calls itself off', async () => {
    const t = target();
    const d = new HttpDispatch(t.url, { token: t.token, namespace: freshNs() });
    const { job } = await submitToLiveWorker(d, t, 'q', 'kept', 0);
    expect(job?.id).toBe('kept');
    // Past the answer's tail: the job is still the live worker's (nothing gave it back).
    await work(500);
    expect(await d.get('kept')).toMatchObject({ state: 'running', workerId: 'live', attempt: 1 });
    // A claim aborted by its caller leaves the queue at once, here through the explicit cancel too.
    const ac = new AbortController();
    const aborted = d.claim('q', 'quitter', { waitMs: 20_000, signal: ac.signal });
    await until(async () => (await parked(t, d.namespace, 'q')) === 1, 'the claim to park');
    ac.abort();
    expect(await aborted).toBeNull();
    await until(async () => (await parked(t, d.namespace, 'q')) === 0, 'the aborted claim to leave', 2_000);
    await d.close();
  });
});
