/**
 * Push delivery on every plane (docs/contract.md, "Push delivery"): the edge plane pushes by
 * itself; a local plane (memory, file, the Python plane's file) is pushed from by `lakeshore push`'s
 * pusher (client/local/push.ts), started by the handle's `pushFrom`. Each job reaches the receiver
 * signed (checked with the reference library), its answer settles it, a 500 is retried.
 */
import { afterEach, describe, expect, it } from 'vitest';
import type { Server } from 'node:http';
import { closeReceiver, json, receiver } from '../support/push-receiver.ts';
import { until } from '../support/wait.ts';
import parsePrometheusTextFormat from 'parse-prometheus-text-format';
import type { PlaneHandle } from './planes.ts';

export function pushDelivery(handle: () => PlaneHandle) {
  describe('push delivery', () => {
    const servers: Server[] = [];
    afterEach(async () => {
      for (const s of servers.splice(0)) await closeReceiver(s);
    });

    it('POSTs each job to its target, signed; the answer settles it, the body its result; a 500 is retried', async () => {
      const h = handle();
      const d = h.plane;
      const r = await receiver((hit, _req, res) => {
        if (hit.id === 'push3' && hit.attempt === 1) return json(res, 500, { error: 'not yet' });
        json(res, 200, { echo: hit.id, attempt: hit.attempt });
      });
      servers.push(r.server);
      const set = await d.configureQueue('pushed', {
        push: { url: r.url, concurrency: 4, timeoutMs: 5_000 },
        retryBackoff: { initialMs: 10, factor: 1, maxMs: 10, jitter: 0 },
      });
      r.setSecret(set.settings.push!.secret!);
      const pushing = h.pushFrom?.();
      try {
        for (let i = 0; i < 20; i++) await d.submit('pushed', new TextEncoder().encode(JSON.stringify({ i })), { id: `push${i}` });
        await until(async () => (await d.count('pushed', 'succeeded')) === 20, '20 pushed jobs succeeded', 20_000, 50);
        expect(r.hits.filter((x) => !x.verified)).toEqual([]);
        const times = (id: string) => r.hits.filter((x) => x.id === id).length;
        for (let i = 0; i < 20; i++) expect(times(`push${i}`), `push${i}`).toBe(i === 3 ? 2 : 1);
        expect(JSON.parse(new TextDecoder().decode((await d.result('push3', { timeoutMs: 0 }))!))).toEqual({ echo: 'push3', attempt: 2 });
        const hit = r.hits.find((x) => x.id === 'push5')!;
        expect(hit.webhookId).toBe('push5.1');
        expect(hit.delivery).toMatchObject({
          type: 'lakeshore.delivery',
          id: 'push5',
          queue: 'pushed',
          attempt: 1,
          worker_id: 'lakeshore-push',
        });
        expect(JSON.parse(Buffer.from(String(hit.delivery.envelope), 'base64').toString())).toEqual({ i: 5 });
        // A delivery token where the plane has an HTTP face to use it on; none on a local plane.
        if (h.pushFrom) expect(hit.delivery.delivery_token).toBeNull();
        else expect(String(hit.delivery.delivery_token)).toMatch(/^lsd_/);

        // The operator view: the overview and the metrics tell the figures of the pusher that runs
        // where they are answered (the queue object; a local plane's own pusher); null elsewhere.
        const [o] = await d.overview(['pushed']);
        if (h.pushesFromAnotherProcess) {
          expect(o!.pushing).toBeNull();
        } else {
          expect(o!.pushing).toMatchObject({
            url: r.url,
            concurrency: 4,
            inFlight: 0,
            delivered: { acked: 20, accepted: 0, nacked: 1, refused: 0 },
            lastError: { id: 'push3', status: 500 },
          });
          expect(o!.pushing!.lastError!.message).toMatch(/answered 500/);
          expect(o!.pushing!.latencyMs!.p99).toBeGreaterThanOrEqual(o!.pushing!.latencyMs!.p50);
          const families = parsePrometheusTextFormat(await d.metrics());
          const delivered = families.find((f) => f.name === 'lakeshore_push_deliveries_total')!;
          expect(delivered.type).toBe('COUNTER');
          const of = (outcome: string) =>
            Number(delivered.metrics.find((m) => m.labels?.queue === 'pushed' && m.labels.outcome === outcome)?.value);
          expect([of('acked'), of('nacked')]).toEqual([20, 1]);
          const inFlight = families.find((f) => f.name === 'lakeshore_push_in_flight')!;
          expect(Number(inFlight.metrics.find((m) => m.labels?.queue === 'pushed')?.value)).toBe(0);
        }
      } finally {
        await pushing?.stop();
        await d.configureQueue('pushed', { push: null });
      }
    });

    it('a failed delivery waits the push backoff (10 s) where its queue sets none; a queue backoff of 0 retries at once', async () => {
      const h = handle();
      const d = h.plane;
      const r = await receiver((hit, _req, res) => {
        if (hit.id === 'down' || hit.attempt === 1) return json(res, 503, { error: 'deploying' });
        json(res, 200, 'ok');
      });
      servers.push(r.server);
      const secret = (await d.configureQueue('hooks-default', { push: { url: r.url, concurrency: 2, timeoutMs: 5_000 } })).settings.push!
        .secret!;
      const own = await d.configureQueue('hooks-own', {
        push: { url: r.url, concurrency: 2, timeoutMs: 5_000 },
        retryBackoff: { initialMs: 0 },
      });
      expect(own.settings.retryBackoff).toMatchObject({ initialMs: 0 });
      const pushing = h.pushFrom?.();
      try {
        r.setSecret(secret);
        await d.submit('hooks-default', new TextEncoder().encode('{}'), { id: 'down' });
        await until(async () => (await d.get('down'))?.state === 'delayed', 'the failed delivery waits', 20_000, 20);
        const row = (await d.get('down'))!;
        const failedAt = r.hits.find((x) => x.id === 'down')!.at;
        // 10 s, ±10 %, from the moment the receiver answered (give or take this machine's clock reads).
        expect(row.runAt! - failedAt).toBeGreaterThanOrEqual(9_000 - 1_000);
        expect(row.runAt! - failedAt).toBeLessThanOrEqual(11_000 + 1_000);
        expect(row.attempt).toBe(1);
        expect(row.error?.message).toMatch(/answered 503/);
        expect(r.hits.filter((x) => x.id === 'down')).toHaveLength(1);

        // The queue's own backoff, 0 here, wins: the job is delivered again at once and succeeds.
        r.setSecret(own.settings.push!.secret!);
        await d.submit('hooks-own', new TextEncoder().encode('{}'), { id: 'blip' });
        expect(await d.result('blip', { timeoutMs: 10_000 })).not.toBeNull();
        expect(r.hits.filter((x) => x.id === 'blip').map((x) => x.attempt)).toEqual([1, 2]);
      } finally {
        await pushing?.stop();
        await d.configureQueue('hooks-default', { push: null });
        await d.configureQueue('hooks-own', { push: null });
      }
    });

    it('a 202 leaves the job to its delivery token; where a delivery has none (a local plane) the operator hears why that cannot work', async () => {
      const h = handle();
      const d = h.plane;
      const r = await receiver((_hit, _req, res) => res.writeHead(202).end());
      servers.push(r.server);
      const secret = (await d.configureQueue('accepting', { push: { url: r.url, concurrency: 1, timeoutMs: 5_000 } })).settings.push!
        .secret!;
      r.setSecret(secret);
      const pushing = h.pushFrom?.();
      try {
        await d.submit('accepting', new TextEncoder().encode('{}'), { id: 'taken-on' });
        await until(() => r.hits.length === 1, 'the delivery', 20_000, 20);
        expect((await d.get('taken-on'))?.state).toBe('running'); // the receiver's until its lease ends
        if (!h.pushesFromAnotherProcess) {
          await until(async () => (await d.overview(['accepting']))[0]?.pushing?.delivered.accepted === 1, 'the 202 counted', 10_000, 20);
          const lastError = (await d.overview(['accepting']))[0]!.pushing!.lastError;
          if (h.pushFrom)
            expect(lastError?.message).toMatch(/a local delivery carries no delivery token .* delivered again once its lease runs out/);
          else expect(lastError).toBeNull();
        }
      } finally {
        await pushing?.stop();
        await d.cancel('taken-on');
        await d.configureQueue('accepting', { push: null });
      }
    });

    it('pushes batches of up to push.batch_size jobs, and settles each job by the outcome its answer names', async () => {
      const h = handle();
      const d = h.plane;
      const r = await receiver((hit, _req, res) => {
        const outcomes: Record<string, unknown> = {};
        for (const j of hit.jobs) {
          if (j.id === 'batch5') outcomes[j.id] = { status: 'ok', result: { echo: j.id } };
          if (j.id === 'batch3' && j.attempt === 1) outcomes[j.id] = { status: 'retry', error: 'not yet', delay_ms: 0 };
          if (j.id === 'batch7' && j.attempt === 1) outcomes[j.id] = { status: 'maybe' };
        }
        // No content type: a batch's answer is read as JSON whatever its headers say.
        res.writeHead(200).end(JSON.stringify({ outcomes }));
      });
      servers.push(r.server);
      // The jobs wait first (the queue paused until the receiver knows its secret), so that the
      // first claim takes several batches' worth.
      await d.pauseQueue('batched');
      for (let i = 0; i < 20; i++) await d.submit('batched', new TextEncoder().encode(JSON.stringify({ i })), { id: `batch${i}` });
      const set = await d.configureQueue('batched', {
        push: { url: r.url, concurrency: 2, timeoutMs: 5_000, batchSize: 4 },
        retryBackoff: { initialMs: 10, factor: 1, maxMs: 10, jitter: 0 },
      });
      expect(set.settings.push).toMatchObject({ concurrency: 2, batchSize: 4 });
      expect((await d.queueInfo('batched')).settings.push).toMatchObject({ batchSize: 4 });
      r.setSecret(set.settings.push!.secret!);
      await d.resumeQueue('batched');
      const pushing = h.pushFrom?.();
      try {
        await until(async () => (await d.count('batched', 'succeeded')) === 20, '20 batched jobs succeeded', 20_000, 50);
        expect(r.hits.filter((x) => !x.verified)).toEqual([]);
        expect(r.hits.every((x) => x.delivery.type === 'lakeshore.batch' && x.jobs.length >= 1 && x.jobs.length <= 4)).toBe(true);
        expect(r.hits.some((x) => x.jobs.length === 4)).toBe(true);
        for (const x of r.hits) expect(x.webhookId).toBe(`batch_${x.jobs[0]!.id}.${x.jobs[0]!.attempt}`);
        const times = (id: string) => r.hits.flatMap((x) => x.jobs).filter((j) => j.id === id).length;
        for (let i = 0; i < 20; i++) expect(times(`batch${i}`), `batch${i}`).toBe(i === 3 || i === 7 ? 2 : 1);
        const result = async (id: string) => {
          const b = await d.result(id, { timeoutMs: 0 });
          return b && JSON.parse(new TextDecoder().decode(b));
        };
        expect(await result('batch5')).toEqual({ echo: 'batch5' });
        expect(await result('batch1')).toBeNull();
        const hit = r.hits.find((x) => x.jobs.some((j) => j.id === 'batch5'))!;
        const job = (hit.delivery.jobs as Record<string, unknown>[]).find((j) => j.id === 'batch5')!;
        expect(hit.delivery).toMatchObject({ namespace: expect.any(String), queue: 'batched', worker_id: 'lakeshore-push' });
        expect(job).toMatchObject({ id: 'batch5', attempt: 1, priority: 0 });
        expect(JSON.parse(Buffer.from(String(job.envelope), 'base64').toString())).toEqual({ i: 5 });
        if (h.pushFrom) expect(job.delivery_token).toBeNull();
        else expect(String(job.delivery_token)).toMatch(/^lsd_/);
        // The retried jobs carry why: the receiver's error, and what was wrong with an outcome.
        const errors = async (id: string) => (await d.get(id))!.error?.message;
        expect(await errors('batch3')).toMatch(/asked to retry it: not yet/);
        expect(await errors('batch7')).toMatch(/is not \{"status"/);
        if (!h.pushesFromAnotherProcess) {
          const [o] = await d.overview(['batched']);
          expect(o!.pushing).toMatchObject({ concurrency: 2, inFlight: 0, delivered: { acked: 20, nacked: 2 } });
        }
      } finally {
        await pushing?.stop();
        await d.configureQueue('batched', { push: null });
      }
    });

    it('a delivery the receiver holds does not hold back the jobs submitted after it', async () => {
      const h = handle();
      const d = h.plane;
      let release: () => void = () => {};
      const held = new Promise<void>((r) => (release = r));
      const r = await receiver((hit, _req, res) => {
        // The first job is answered only once the second has arrived: pushed one after the other, never.
        if (hit.id === 'held') void held.then(() => json(res, 200, { id: hit.id }));
        else {
          release();
          json(res, 200, { id: hit.id });
        }
      });
      servers.push(r.server);
      const set = await d.configureQueue('holding', { push: { url: r.url, concurrency: 4, timeoutMs: 20_000 } });
      r.setSecret(set.settings.push!.secret!);
      const pushing = h.pushFrom?.();
      try {
        await d.submit('holding', new TextEncoder().encode('{}'), { id: 'held' });
        await until(async () => r.hits.length === 1, 'the first delivery reached the receiver', 10_000, 20);
        await d.submit('holding', new TextEncoder().encode('{}'), { id: 'next' });
        await until(async () => (await d.count('holding', 'succeeded')) === 2, 'both jobs succeeded', 15_000, 50);
        expect(r.hits.map((x) => x.id)).toEqual(['held', 'next']);
      } finally {
        release();
        await pushing?.stop();
        await d.configureQueue('holding', { push: null });
      }
    });
  });
}
