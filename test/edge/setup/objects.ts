/** White-box access to a queue's Durable Object and its D1 rows, for tests only. */
import { env } from 'cloudflare:workers';
import { runInDurableObject } from 'cloudflare:test';
import type { QueueObject } from '../../../src/durable/queue-object.ts';
import { until } from '../../support/wait.ts';
import { place } from '../../../src/durable/directory.ts';
import { WORKER_ID } from '../../../src/core/sql/workers.ts';

/**
 * The D1 database of the namespace's shard (placing the namespace now if it is new, as its first
 * request would): where a white-box test reads and writes its rows.
 */
export async function dbOf(ns: string): Promise<D1Database> {
  return (await place(env, ns, 10_000_000_000)).db;
}

export function queueStub(ns: string, queue: string): DurableObjectStub<QueueObject> {
  const binding = env.QUEUE as unknown as DurableObjectNamespace<QueueObject>;
  return binding.get(binding.idFromName(`${ns}\u0000${queue}`));
}

/**
 * Moves a running invocation's lease into the past, as if its worker had gone silent. The change
 * goes around the queue's object, so the object's hints of lease times are dropped (relearned on
 * its next sweep): left to them, its claims would not look for an expired lease before its time.
 */
export async function expireLease(ns: string, id: string): Promise<void> {
  const row = await (await dbOf(ns))
    .prepare(`UPDATE invocations SET lease_until = 1 WHERE ns = ?1 AND id = ?2 AND state = 'running' RETURNING queue`)
    .bind(ns, id)
    .first<{ queue: string }>();
  if (row) await runInDurableObject(queueStub(ns, row.queue), (o) => o.forgetHints());
}

/** A namespace's rows as a refused write must leave them: state, holder, attempt, lease, result and error. */
export async function rows(ns: string): Promise<Record<string, unknown>[]> {
  const r = await (await dbOf(ns))
    .prepare(
      `SELECT id, queue, state, attempt, ${WORKER_ID}, lease_until, hex(result) AS result, error, finished_at FROM invocations WHERE ns = ?1 ORDER BY rid`,
    )
    .bind(ns)
    .all();
  return r.results;
}

export async function frameCount(ns: string, id: string): Promise<number> {
  const r = await (await dbOf(ns))
    .prepare(`SELECT count(*) AS n FROM frames WHERE inv = (SELECT rid FROM invocations WHERE ns = ?1 AND id = ?2)`)
    .bind(ns, id)
    .first<{ n: number }>();
  return r?.n ?? 0;
}

/** Resolves once `n` calls are parked on the queue's object: what ordering a wait before its wake needs. */
export async function parkedOn(ns: string, queue: string, n = 1): Promise<void> {
  const stub = queueStub(ns, queue);
  await until(async () => (await stub.stats()).waiters >= n, `${n} call(s) parked on ${queue}`, 10_000);
}
