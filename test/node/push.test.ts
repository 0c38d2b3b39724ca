/**
 * Push delivery (docs/contract.md, "Push delivery") on `wrangler dev`: the queue object POSTs each
 * job to a receiver, a small HTTP server here on loopback, signed per Standard Webhooks; its
 * answer settles the job. The signatures are checked with the spec's reference library
 * (`standardwebhooks`), not with our own helper.
 */
import { type Server, createServer, request } from 'node:http';
import type { AddressInfo } from 'node:net';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { Webhook } from 'standardwebhooks';
import {
  FrameKind,
  HttpDispatch,
  UnauthorizedError,
  batchAnswer,
  finishLater,
  Queue,
  verifyBatch,
  verifyDelivery,
  type Delivery,
  FencingConflictError,
  ForbiddenError,
  NotFoundError,
} from '../../client/local/index.ts';
import { cli, planeEnv } from './setup/cli.ts';
import { until } from '../support/wait.ts';
import { type Hit, json, receiver } from '../support/push-receiver.ts';

const RECEIVER = join(import.meta.dirname, '..', 'support', 'push-receiver-process.ts');

/** Jobs pushed in the throughput case (PUSH_JOBS overrides). */
const N = Number(process.env.PUSH_JOBS ?? 10_000);

const servers: Server[] = [];
afterEach(async () => {
  for (const s of servers.splice(0)) {
    s.closeAllConnections();
    await new Promise((r) => s.close(r));
  }
});

/** A receiver that verifies each delivery, keeps it, and answers 202: the test finishes it with finishLater. */
async function laterReceiver() {
  const deliveries: Delivery[] = [];
  let secret = '';
  const r = await receiver((hit, req, res) => {
    void verifyDelivery(secret, req.headers as Record<string, string>, hit.body).then((x) => {
      deliveries.push(x);
      res.writeHead(202).end();
    });
  });
  servers.push(r.server);
  return { deliveries, url: r.url, setSecret: (s: string) => (secret = s) };
}

function plane(env = planeEnv('edge')) {
  return new HttpDispatch(env.LAKESHORE_URL!, { token: env.LAKESHORE_TOKEN!, namespace: env.LAKESHORE_NAMESPACE!, retryForMs: 30_000 });
}

describe('push delivery', () => {
  it(`delivers ${N} jobs at a concurrency of 16: each succeeds once, every request verifies with the reference library`, async () => {
    const d = plane();
    let open = 0;
    let most = 0;
    const r = await receiver((hit, _req, res) => {
      open++;
      most = Math.max(most, open);
      setImmediate(() => {
        open--;
        json(res, 200, { echo: hit.id });
      });
    });
    servers.push(r.server);
    // A long request timeout: each delivery's timer must end with its request, or 10,000 of them reach workerd's bound on live timers.
    const set = await d.configureQueue('hooks', { push: { url: r.url, concurrency: 16, timeoutMs: 120_000 } });
    r.setSecret(set.settings.push!.secret!);
    const t0 = Date.now();
    for (let i = 0; i < N; i += 500)
      await d.submitMany(
        'hooks',
        Array.from({ length: Math.min(500, N - i) }, (_, k) => ({
          envelope: new TextEncoder().encode(JSON.stringify({ n: i + k })),
          opts: { id: `p${i + k}` },
        })),
      );
    await until(async () => (await d.count('hooks', 'succeeded')) === N, `${N} pushed jobs succeeded`, 120_000, 200);
    const ms = Date.now() - t0;
    console.log(`[push] ${N} jobs in ${ms} ms (${Math.round((N * 1000) / ms)} jobs/s), most at once ${most}`);
    // Exactly once: one request per job, each verified, none beyond 16 at once.
    expect(r.hits.length).toBe(N);
    expect(new Set(r.hits.map((h) => h.id)).size).toBe(N);
    expect(r.hits.filter((h) => !h.verified)).toEqual([]);
    expect(most).toBeLessThanOrEqual(16);
    expect(await d.count('hooks', 'failed')).toBe(0);
    // The delivery: the job, its envelope, its attempt; webhook-id is the job id and attempt.
    const h = r.hits.find((x) => x.id === 'p7')!;
    expect(h.webhookId).toBe('p7.1');
    expect(h.delivery).toMatchObject({ type: 'lakeshore.delivery', id: 'p7', queue: 'hooks', attempt: 1 });
    expect(JSON.parse(Buffer.from(String(h.delivery.envelope), 'base64').toString())).toEqual({ n: 7 });
    expect(String(h.delivery.delivery_token)).toMatch(/^lsd_/);
    // The answer's body is the result.
    expect(JSON.parse(new TextDecoder().decode((await d.result('p7', { timeoutMs: 0 }))!))).toEqual({ echo: 'p7' });
    // A tampered body, or the right body under another secret, does not verify with the reference library.
    const wh = new Webhook(set.settings.push!.secret!);
    const headers = { 'webhook-id': 'x.1', 'webhook-timestamp': String(Math.floor(Date.now() / 1000)), 'webhook-signature': 'v1,AAAA' };
    expect(() => wh.verify('{}', headers)).toThrow();
    // Our helper agrees with the reference: it reads a real delivery, and refuses it altered or under another secret.
    const secret = set.settings.push!.secret!;
    const got = await verifyDelivery(secret, h.headers, h.body, { now: h.at });
    expect(got).toMatchObject({ id: 'p7', queue: 'hooks', attempt: 1, webhookId: 'p7.1', workerId: 'lakeshore-push' });
    expect(JSON.parse(new TextDecoder().decode(got.envelope))).toEqual({ n: 7 });
    await expect(verifyDelivery(secret, h.headers, h.body.replace('"p7"', '"p8"'), { now: h.at })).rejects.toBeInstanceOf(
      UnauthorizedError,
    );
    const other = (await d.configureQueue('hooks', { push: { url: r.url, rotateSecret: true } })).settings.push!.secret!;
    await expect(verifyDelivery(other, h.headers, h.body, { now: h.at })).rejects.toBeInstanceOf(UnauthorizedError);
    await expect(verifyDelivery(secret, h.headers, h.body, { now: h.at + 301_000 })).rejects.toBeInstanceOf(UnauthorizedError);
    // And what the reference library signs, our helper verifies (both directions of the spec).
    const signed = wh.sign('ref.1', new Date(h.at), h.body);
    const ref = { 'webhook-id': 'ref.1', 'webhook-timestamp': String(Math.floor(h.at / 1000)), 'webhook-signature': signed };
    expect((await verifyDelivery(secret, ref, h.body, { now: h.at })).id).toBe('p7');
    await d.configureQueue('hooks', { push: null });
  }, 180_000);

  it('pushes batches: verifyBatch reads each, batchAnswer settles each job, at most batch_size jobs and concurrency requests at once', async () => {
    const d = plane();
    let secret = '';
    let open = 0;
    let most = 0;
    const seen: string[] = [];
    const refused: unknown[] = [];
    const r = await receiver((hit, _req, res) => {
      open++;
      most = Math.max(most, open);
      void (async () => {
        // The receiver as a user writes it: our helper (the reference library checks every hit too).
        const b = await verifyBatch(secret, hit.headers, hit.body);
        await verifyDelivery(secret, hit.headers, hit.body).catch((e: unknown) => refused.push(e));
        const outcomes: Parameters<typeof batchAnswer>[0] = {};
        for (const j of b.jobs) {
          seen.push(`${j.id}.${j.attempt}`);
          const n = (JSON.parse(new TextDecoder().decode(j.envelope)) as { n: number }).n;
          outcomes[j.id] = n % 10 === 3 && j.attempt === 1 ? { retry: true, error: 'later', delayMs: 0 } : { ok: { twice: n * 2 } };
        }
        open--;
        json(res, 200, batchAnswer(outcomes));
      })();
    });
    servers.push(r.server);
    await d.pauseQueue('batches');
    const n = 500;
    await d.submitMany(
      'batches',
      Array.from({ length: n }, (_, k) => ({ envelope: new TextEncoder().encode(JSON.stringify({ n: k })), opts: { id: `b${k}` } })),
    );
    const set = await d.configureQueue('batches', {
      push: { url: r.url, concurrency: 4, batchSize: 25 },
      retryBackoff: { initialMs: 10, factor: 1, maxMs: 10, jitter: 0 },
    });
    secret = set.settings.push!.secret!;
    r.setSecret(secret);
    await d.resumeQueue('batches');
    await until(async () => (await d.count('batches', 'succeeded')) === n, `${n} batched jobs succeeded`, 60_000, 100);
    expect(r.hits.filter((h) => !h.verified)).toEqual([]);
    expect(r.hits.every((h) => h.jobs.length >= 1 && h.jobs.length <= 25)).toBe(true);
    expect(most).toBeLessThanOrEqual(4);
    // Far fewer requests than jobs: 550 deliveries of a job (50 retried) in batches of up to 25.
    expect(seen.length).toBe(n + n / 10);
    expect(new Set(seen).size).toBe(seen.length);
    expect(r.hits.length).toBeLessThan(seen.length / 5);
    expect(JSON.parse(new TextDecoder().decode((await d.result('b13', { timeoutMs: 0 }))!))).toEqual({ twice: 26 });
    expect((await d.get('b13'))!.attempt).toBe(2);
    expect((await d.get('b14'))!.attempt).toBe(1);
    // verifyDelivery does not read a batch as one job; a batch altered in flight does not verify.
    expect(refused.length).toBe(r.hits.length);
    expect(refused.every((e) => e instanceof TypeError && /verifyBatch/.test(e.message))).toBe(true);
    const h = r.hits[0]!;
    await expect(verifyBatch(secret, h.headers, h.body.replace('"b', '"x'), { now: h.at })).rejects.toBeInstanceOf(UnauthorizedError);
    // What the reference library signs, verifyBatch reads.
    const signed = new Webhook(secret).sign('batch_ref.1', new Date(h.at), h.body);
    const ref = { 'webhook-id': 'batch_ref.1', 'webhook-timestamp': String(Math.floor(h.at / 1000)), 'webhook-signature': signed };
    expect((await verifyBatch(secret, ref, h.body, { now: h.at })).jobs.map((j) => j.id)).toEqual(h.jobs.map((j) => j.id));
    await d.configureQueue('batches', { push: null });
  }, 120_000);

  it('retries 500s, 429 after its Retry-After, a hung receiver and a dropped connection, per the budget; none is acked twice', async () => {
    const d = plane();
    const oks = new Map<string, number>();
    const r = await receiver((hit, req, res) => {
      const first = hit.attempt === 1;
      if (hit.id.startsWith('always')) return json(res, 500, { error: 'down' });
      if (first && hit.id.startsWith('e500')) return json(res, 500, { error: 'boom' });
      if (first && hit.id.startsWith('e429')) return json(res, 429, { error: 'slow down' }, { 'retry-after': '2' });
      if (first && hit.id.startsWith('hang')) return; // no answer: the plane's timeout ends it
      if (first && hit.id.startsWith('drop')) return req.socket.destroy();
      oks.set(hit.id, (oks.get(hit.id) ?? 0) + 1);
      json(res, 200, { ok: hit.id, attempt: hit.attempt });
    });
    servers.push(r.server);
    await d.configureQueue('flaky', {
      maxAttempts: 3,
      retryBackoff: { initialMs: 50, factor: 1, maxMs: 50, jitter: 0 },
      push: { url: r.url, concurrency: 8, timeoutMs: 1_000 },
    });
    const ids = ['e500-a', 'e500-b', 'e429-a', 'hang-a', 'drop-a', 'fine-a', 'always-a'];
    for (const id of ids) await d.submit('flaky', new TextEncoder().encode('{}'), { id });
    await until(
      async () => (await d.count('flaky', 'succeeded')) === 6 && (await d.count('flaky', 'failed')) === 1,
      'six succeeded and one failed',
      30_000,
      100,
    );
    const attempts = (id: string) => r.hits.filter((h) => h.id === id).map((h) => h.attempt);
    for (const id of ['e500-a', 'e500-b', 'e429-a', 'hang-a', 'drop-a']) expect(attempts(id), id).toEqual([1, 2]);
    expect(attempts('fine-a')).toEqual([1]);
    expect(attempts('always-a')).toEqual([1, 2, 3]); // the budget, then failed
    for (const id of ids.filter((i) => !i.startsWith('always'))) expect(oks.get(id), id).toBe(1);
    // Retry-After: the second attempt came no sooner than the receiver asked (2 s; the plane's clock rounds down to 1 s at most).
    const [a1, a2] = r.hits.filter((h) => h.id === 'e429-a');
    expect(a2!.at - a1!.at).toBeGreaterThanOrEqual(1_000);
    const failed = await d.get('always-a');
    expect(failed?.error?.message).toContain('push target answered 500');
    expect((await d.get('hang-a'))?.attempt).toBe(2);
    await d.configureQueue('flaky', { push: null });
  }, 60_000);

  it('a receiver answering 202 streams 100 frames and acks with its delivery token, which acts on that attempt only', async () => {
    const d = plane();
    const env = planeEnv('edge');
    const url = env.LAKESHORE_URL!;
    const accepted: Hit[] = [];
    const r = await receiver((hit, _req, res) => {
      accepted.push(hit);
      res.writeHead(202).end();
    });
    servers.push(r.server);
    await d.configureQueue('later', { push: { url: r.url, concurrency: 2, timeoutMs: 5_000 } });
    await d.submit('later', new TextEncoder().encode('{}'), { id: 'slow' });
    await d.submit('other', new TextEncoder().encode('{}'), { id: 'bystander' });
    await until(() => accepted.length === 1, 'the delivery', 10_000);
    const delivery = accepted[0]!.delivery;
    const token = String(delivery.delivery_token);
    const as = new HttpDispatch(url, { token, namespace: String(delivery.namespace) });
    const w = String(delivery.worker_id);
    expect((await d.get('slow'))?.state).toBe('running'); // 202: it stays the receiver's
    // Its own job: heartbeat, frames, read.
    expect((await as.heartbeat('slow', w, { attempt: 1 })).leaseUntil).toBeGreaterThan(Date.now());
    await as.journalAppend(
      'slow',
      null,
      { kind: FrameKind.BEGIN, seq: 0, body: new Uint8Array(), meta: null },
      { workerId: w, attempt: 1 },
    );
    for (let i = 0; i < 100; i++)
      await as.journalAppend(
        'slow',
        null,
        { kind: FrameKind.VALUE, seq: 0, body: new TextEncoder().encode(JSON.stringify(i)), meta: null },
        { workerId: w, attempt: 1 },
      );
    // Nothing else: another job, another queue's submit, another attempt.
    expect(await as.get('bystander')).toBeNull(); // as if there were nothing there
    await expect(as.journalPage('bystander')).rejects.toBeInstanceOf(NotFoundError);
    await expect(as.submit('later', new TextEncoder().encode('{}'), { id: 'sneaky' })).rejects.toBeInstanceOf(ForbiddenError);
    await expect(as.ack('slow', w, { attempt: 2 })).rejects.toBeInstanceOf(ForbiddenError);
    await expect(
      new HttpDispatch(url, { token: `${token.slice(0, -2)}AA`, namespace: String(delivery.namespace) }).get('slow'),
    ).rejects.toBeInstanceOf(UnauthorizedError);
    await as.journalAppend(
      'slow',
      null,
      { kind: FrameKind.END, seq: 0, body: new Uint8Array(), meta: null },
      { workerId: w, attempt: 1, final: true },
    );
    await as.ack('slow', w, { attempt: 1, result: new TextEncoder().encode('"done"') });
    expect(new TextDecoder().decode((await d.result('slow', { timeoutMs: 0 }))!)).toBe('"done"');
    const page = await d.journalPage('slow');
    expect(page.frames.filter((f) => f.kind === FrameKind.VALUE)).toHaveLength(100);
    // The attempt is over: the same ack again is absorbed (acks are idempotent), a frame is refused like a late worker's.
    await as.ack('slow', w, { attempt: 1, result: new TextEncoder().encode('"done"') });
    await expect(
      as.journalAppend(
        'slow',
        null,
        { kind: FrameKind.VALUE, seq: 0, body: new TextEncoder().encode('1'), meta: null },
        { workerId: w, attempt: 1 },
      ),
    ).rejects.toBeInstanceOf(FencingConflictError);
    await d.configureQueue('later', { push: null });
  }, 60_000);

  it('a 202 receiver finishes with finishLater: its values stream live to the job’s handle, its ack is the result, its nack a retry', async () => {
    const d = plane();
    const env = planeEnv('edge');
    const { deliveries, url, setSecret } = await laterReceiver();
    setSecret(
      (await d.configureQueue('slow-fn', { push: { url, concurrency: 2, timeoutMs: 5_000 }, retryBackoff: { initialMs: 0 } })).settings
        .push!.secret!,
    );
    const q = new Queue('slow-fn', { dispatch: d });
    const h = await q.submit('train', 3);
    await until(() => deliveries.length === 1, 'the delivery', 10_000);
    const job = finishLater(deliveries[0]!, env.LAKESHORE_URL);
    expect((await d.get(h.id))?.state).toBe('running'); // 202: the receiver's now
    // Each value reaches the job's reader before the next is sent: live, not at the end.
    const seen: unknown[] = [];
    const reading = (async () => {
      for await (const v of h.stream()) seen.push(v);
    })();
    for (let step = 0; step < 3; step++) {
      await job.emit({ step });
      await until(() => seen.length === step + 1, `value ${step} read`, 10_000);
    }
    expect(await job.heartbeat()).toBe(false);
    await job.ack({ loss: 0.25 });
    await reading;
    expect(seen).toEqual([{ step: 0 }, { step: 1 }, { step: 2 }]);
    expect(await h.result()).toEqual({ loss: 0.25 });
    await expect(job.ack(1)).rejects.toThrow(/already acked or nacked/);

    // A nack with retry: the job is delivered again (the queue's backoff is 0 here), as attempt 2.
    const h2 = await q.submit('train', 4);
    await until(() => deliveries.length === 2, 'the second delivery', 10_000);
    expect(await finishLater(deliveries[1]!, env.LAKESHORE_URL).nack(new RangeError('out of memory'))).toBe('queued');
    await until(() => deliveries.length === 3, 'its next attempt', 10_000);
    expect(deliveries[2]).toMatchObject({ id: h2.id, attempt: 2 });
    await finishLater(deliveries[2]!, env.LAKESHORE_URL).ack('ok');
    expect(await h2.result()).toBe('ok');
    // A local plane's delivery carries no token: finishLater says to answer with the outcome.
    expect(() => finishLater({ ...deliveries[0]!, deliveryToken: null }, env.LAKESHORE_URL)).toThrow(/answer it with its outcome/);
    await d.configureQueue('slow-fn', { push: null });
  }, 60_000);

  it('finishLater: a call the plane never had may be made again, and sends nothing twice', async () => {
    const d = plane();
    const env = planeEnv('edge');
    const { deliveries, url, setSecret } = await laterReceiver();
    // Between the receiver and the plane, a proxy that drops the requests `lost` picks, unforwarded.
    let lost = (_path: string) => false;
    const upstream = new URL(env.LAKESHORE_URL!);
    const proxy = createServer((req, res) => {
      if (lost(req.url!)) return req.socket.destroy();
      const out = request(
        { host: upstream.hostname, port: upstream.port, path: req.url, method: req.method, headers: req.headers },
        (a) => {
          res.writeHead(a.statusCode!, a.headers);
          a.pipe(res);
        },
      );
      req.pipe(out);
    });
    servers.push(proxy);
    await new Promise<void>((ok) => proxy.listen(0, '127.0.0.1', ok));
    const via = `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`;
    setSecret((await d.configureQueue('flaky-fn', { push: { url, timeoutMs: 5_000 } })).settings.push!.secret!);
    const h = await new Queue('flaky-fn', { dispatch: d }).submit('train', 3);
    await until(() => deliveries.length === 1, 'the delivery', 10_000);
    const job = finishLater(deliveries[0]!, via, { retryForMs: 300 });

    lost = () => true; // the plane away: the first emit, its BEGIN frame, never arrives
    await expect(job.emit(1)).rejects.toThrow();
    lost = () => false;
    await job.emit(1);
    await job.emit(2);
    lost = (path) => path.endsWith('/ack'); // the END frame arrives, the ack does not
    await expect(job.ack('done')).rejects.toThrow();
    lost = () => false;
    await job.ack('done'); // again: the job ends, its END not appended twice
    await expect(job.ack('done')).rejects.toThrow(/already acked or nacked/);
    expect(await h.result()).toBe('done');
    const frames = (await d.journalPage(h.id)).frames;
    const kind = Object.fromEntries(Object.entries(FrameKind).map(([k, v]) => [v, k]));
    expect(frames.map((f) => kind[f.kind])).toEqual(['BEGIN', 'VALUE', 'VALUE', 'END']);
    expect(frames.filter((f) => f.kind === FrameKind.VALUE).map((f) => new TextDecoder().decode(f.body))).toEqual(['1', '2']);
    await d.configureQueue('flaky-fn', { push: null });
  }, 60_000);

  it('a receiver SIGKILLed mid-request: its deliveries are retried to the next one, none lost, each acked once by the attempt it ended with', async () => {
    const d = plane();
    const dir = mkdtempSync(join(tmpdir(), 'lakeshore-push-kill-'));
    const log = join(dir, 'answers.jsonl');
    const lines = () =>
      existsSync(log)
        ? readFileSync(log, 'utf8')
            .trim()
            .split('\n')
            .map((l) => JSON.parse(l) as { id: string; attempt: number; answer: number | 'hang'; pid: number })
        : [];
    const start = async (port: number, hang?: string) => {
      const child = spawn(process.execPath, [RECEIVER, String(port), log, ...(hang ? [hang] : [])], {
        stdio: ['ignore', 'pipe', 'inherit'],
      });
      const [line] = (await Promise.race([
        once(child.stdout!, 'data'),
        once(child, 'exit').then(() => Promise.reject(new Error(`the receiver did not start on port ${port}`))),
      ])) as [Buffer];
      return { child, port: Number(line.toString().trim()) };
    };
    const first = await start(0, 'k50');
    let second: Awaited<ReturnType<typeof start>> | undefined;
    try {
      await d.configureQueue('killed', {
        push: { url: `http://127.0.0.1:${first.port}/hook`, concurrency: 4, timeoutMs: 10_000 },
        maxAttempts: 12,
        retryBackoff: { initialMs: 200, factor: 2, maxMs: 2_000, jitter: 0 },
      });
      await d.submitMany(
        'killed',
        Array.from({ length: 100 }, (_, i) => ({ envelope: new TextEncoder().encode('{}'), opts: { id: `k${i}` } })),
      );
      // The receiver holds k50's request (and others are on their way): kill it there.
      await until(() => lines().some((l) => l.answer === 'hang'), 'the receiver holding k50', 30_000);
      first.child.kill('SIGKILL');
      await once(first.child, 'exit');
      // The next receiver, on the same port (as a redeployed function would be).
      for (let tries = 0; !second; tries++) {
        try {
          second = await start(first.port);
        } catch (e) {
          if (tries > 20) throw e;
        }
      }
      await until(async () => (await d.count('killed', 'succeeded')) === 100, '100 jobs succeeded', 60_000, 100);
      expect(await d.count('killed', 'failed')).toBe(0);
      const victim = (await d.get('k50'))!;
      expect(victim.attempt).toBeGreaterThanOrEqual(2);
      // Each job's result is the answer to the attempt it ended with: no late or stale answer was taken.
      for (let i = 0; i < 100; i++) {
        const inv = (await d.get(`k${i}`))!;
        const result = JSON.parse(new TextDecoder().decode(inv.result!)) as { by: number; attempt: number };
        expect(result.attempt, `k${i}`).toBe(inv.attempt);
      }
      expect(JSON.parse(new TextDecoder().decode(victim.result!)).by).toBe(second.child.pid);
      // The receivers answered 200 to each job at least once; twice only where the kill cut the answer on its way.
      const answered = lines().filter((l) => l.answer === 200);
      expect(new Set(answered.map((l) => l.id)).size).toBe(100);
      console.log(
        `[push] SIGKILL: k50 ended at attempt ${victim.attempt}; ${answered.length} answers for 100 jobs, ${answered.filter((l) => l.pid === second!.child.pid).length} from the second receiver`,
      );
      expect(answered.length - 100).toBeLessThanOrEqual(4);
    } finally {
      await d.configureQueue('killed', { push: null });
      first.child.kill('SIGKILL');
      second?.child.kill('SIGKILL');
      rmSync(dir, { recursive: true, force: true });
    }
  }, 120_000);

  it("`lakeshore stats` tells a push queue's target and its pusher's figures", async () => {
    const env = planeEnv('edge');
    const d = plane(env);
    const r = await receiver((hit, _req, res) => (hit.id === 's-bad' ? json(res, 500, { error: 'no' }) : json(res, 200, { ok: true })));
    servers.push(r.server);
    await d.configureQueue('watched', { push: { url: r.url, concurrency: 3, timeoutMs: 5_000 }, maxAttempts: 1 });
    for (const id of ['s-1', 's-2', 's-bad']) await d.submit('watched', new TextEncoder().encode('{}'), { id });
    await until(
      async () => (await d.count('watched', 'succeeded')) === 2 && (await d.count('watched', 'failed')) === 1,
      'two pushed jobs succeeded and one failed',
      20_000,
    );
    const ran = await cli(['stats', 'watched'], env);
    const out = `${ran.stdout}${ran.stderr}`;
    const line = out.split('\n').find((l) => l.startsWith('push: watched'));
    expect(line ?? out).toMatch(
      new RegExp(
        `^push: watched -> ${r.url.replace(/[.]/g, '\\.')}: 0/3 in flight, 2 delivered, 1 not, answers in p50 \\d+ ms, p99 \\d+ ms; last error \\d+ s ago: 500 \\(s-bad\\): push target answered 500`,
      ),
    );
    await d.configureQueue('watched', { push: null });
  }, 60_000);
});

describe('verifyDelivery', () => {
  // The Python client's vector (client/python/tests/test_push.py): signed by the reference library.
  const SECRET = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';
  const BODY =
    '{"type":"lakeshore.delivery","id":"j1","namespace":"default","queue":"q","attempt":1,"lease_until":1,' +
    '"priority":0,"envelope":"e30=","worker_id":"lakeshore-push","delivery_token":null}';
  const HEADERS = {
    'webhook-id': 'j1.1',
    'webhook-timestamp': '1796400000',
    'webhook-signature': 'v1,m8kIpkAP31pSPgFjOxtcx4lmEvxiH4dsCSJL7+aI/Go=',
  };
  const now = 1_796_400_010_000;

  it('says a secret that is not one is the receiver setup error it is, without echoing it', async () => {
    expect((await verifyDelivery(SECRET, HEADERS, BODY, { now })).id).toBe('j1');
    // undefined is what `.settings.push.secret` reads when the answer did not show it (it shows once);
    // a token or a secret cut short is pasted by mistake.
    const bad: unknown[] = [undefined, null, '', 'whsec_', 'lsk_dev_abc-_def', SECRET.slice(0, -3), [undefined, SECRET], []];
    for (const s of bad) {
      const e = await verifyDelivery(s as string, HEADERS, BODY, { now }).catch((x: unknown) => x);
      expect(e, String(s)).toBeInstanceOf(TypeError);
      expect(String(e)).toMatch(/push secret/);
      expect(String(e)).not.toMatch(/abc-_def|MfKQ9r8G/);
    }
  });
});
