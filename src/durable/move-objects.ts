/** The queue objects of a namespace a move fences and unfences: which it ever started, and calling them. */
import type { Cursor } from './copy.ts';
import type { Metered } from './metered.ts';
import { queueObjectName, type QueueObject } from './queue-object.ts';

/** The next names of the queue objects `ns` ever started (directory.ts records them), after the cursor. */
export async function queueObjects(home: Metered, ns: string, cursor: Cursor, most: number): Promise<string[]> {
  const after = cursor ? 'AND queue > ?2' : '';
  const rows = await home.all<{ queue: string }>(
    `SELECT queue FROM namespace_queues WHERE ns = ?1 ${after} ORDER BY queue LIMIT ${most}`,
    ns,
    ...(cursor ?? []),
  );
  return rows.map((r) => r.queue);
}

/**
 * Calls these queue objects of `ns`, all at once. `must`: any failure fails the call (a fence must reach
 * every one); else failures are logged (an unfence an object missed, it takes from the directory
 * itself).
 */
export async function callObjects<T>(
  env: Env,
  ns: string,
  queues: string[],
  call: (o: DurableObjectStub<QueueObject>) => Promise<T>,
  must: boolean,
): Promise<void> {
  const binding = env.QUEUE as unknown as DurableObjectNamespace<QueueObject>;
  const each = async (qs: string[]) => {
    const settled = await Promise.allSettled(qs.map((q) => call(binding.getByName(queueObjectName(ns, q)))));
    return qs.flatMap((q, i) => {
      const s = settled[i]!;
      return s.status === 'rejected' ? [{ q, why: String(s.reason) }] : [];
    });
  };
  let failed = await each(queues);
  // An unfence is tried once more: what it misses waits for the object's own look (MOVE_LOOK_MS).
  if (failed.length && !must) failed = await each(failed.map((f) => f.q));
  if (!failed.length) return;
  const said = failed.map((f) => `${f.q}: ${f.why}`).join('; ');
  if (must) throw new Error(`queue objects of ${ns} did not answer: ${said}`);
  console.error(`move of ${ns}: ${said} (they unfence themselves from the directory)`);
}
