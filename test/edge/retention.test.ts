/**
 * Retention on the edge plane: the queue object's alarm purges finished jobs past their queue's
 * retention in bounded batches. The clock is injected by the rows themselves: 10,000 finished jobs
 * are written as having finished two days ago, under a one-day retention.
 */
import { describe, expect, it } from 'vitest';
import { b64, call, plane } from './setup/http.ts';
import { dbOf, queueStub } from './setup/objects.ts';
import { until } from '../support/wait.ts';

describe('retention', () => {
  it('the alarm purges 10,000 finished jobs past retention, and their frames; a running and a queued job stay, counts stay right', async () => {
    const p = plane();
    const base = `/v1/ns/${p.ns}`;
    await p.submit('q', 'running');
    await p.submit('q', 'waiting');
    await p.claim('q', 'w', { lease_ms: 3_600_000 });
    const twoDaysAgo = Date.now() - 2 * 86_400_000;
    // 8,000 succeeded, 1,500 failed, 500 cancelled, finished two days ago; each succeeded one has a frame.
    await (await dbOf(p.ns))
      .prepare(
        `WITH RECURSIVE k(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM k WHERE i + 1 < 10000)
       INSERT INTO invocations (ns, queue, id, envelope, state, attempt, created_at, updated_at, finished_at)
       SELECT ?1, 'q', 'old' || i, X'00', CASE WHEN i < 8000 THEN 'succeeded' WHEN i < 9500 THEN 'failed' ELSE 'cancelled' END, 1, ?2, ?2, ?2 FROM k`,
      )
      .bind(p.ns, twoDaysAgo)
      .run();
    await (await dbOf(p.ns))
      .prepare(
        `INSERT INTO frames (inv, seq, kind, body, attempt, final, created_at)
       SELECT rid, 0, 0, X'01', 1, 0, ?2 FROM invocations WHERE ns = ?1 AND state = 'succeeded'`,
      )
      .bind(p.ns, twoDaysAgo)
      .run();
    const recent = await call('POST', `${base}/queues/q/invocations`, { id: 'recent', envelope: b64('x') });
    expect(recent.status).toBe(201);
    const stub = queueStub(p.ns, 'q');
    const before = await stub.stats();
    // A one-day retention: the old ones are past it. Setting it asks the object for a purge pass,
    // which its alarm runs at once.
    expect((await call('PUT', `${base}/queues/q`, { retention_ms: 86_400_000 })).body.settings.retention_ms).toBe(86_400_000);
    const left = async () =>
      (await (
        await dbOf(p.ns)
      )
        .prepare(`SELECT count(*) AS n FROM invocations WHERE ns = ?1 AND id LIKE 'old%'`)
        .bind(p.ns)
        .first<{ n: number }>())!.n;
    await until(async () => (await left()) === 0, 'the alarm to purge the old jobs', 30_000);
    const after = await stub.stats();
    const frames = await (await dbOf(p.ns))
      .prepare(`SELECT count(*) AS n FROM frames WHERE inv NOT IN (SELECT rid FROM invocations)`)
      .first<{
        n: number;
      }>();
    expect(frames!.n).toBe(0);
    expect((await call('GET', `${base}/invocations/running`)).body.state).toBe('running');
    expect((await call('GET', `${base}/invocations/waiting`)).body.state).toBe('queued');
    expect((await call('GET', `${base}/queues`)).body.queues[0].counts).toEqual({
      delayed: 0,
      queued: 2,
      running: 1,
      succeeded: 0,
      failed: 0,
      cancelled: 0,
    });
    for (const s of ['succeeded', 'failed', 'cancelled']) expect((await p.count('q', s)).body.count, s).toBe(0);
    const gone = await call('GET', `${base}/invocations/old7`);
    expect(gone.status).toBe(404);
    expect(gone.body.error.message).toContain('retention');
    const perJob = (after.written - before.written) / 10_000;
    console.log(
      `purge: 10,000 finished jobs (8,000 with a frame) in one alarm, ${after.batches - before.batches} D1 batches, ${perJob.toFixed(2)} D1 rows written per job purged`,
    );
  }, 120_000);
});
