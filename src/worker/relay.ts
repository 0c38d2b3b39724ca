/**
 * A stream the queue object serves (a journal, the feed), relayed by this Worker: the caller's
 * token opens a stream lease (limits.ts), the object's fetch gets the lease to keep and answers the
 * stream, or an error before any byte (then the lease is closed here).
 */
import { errorOf, type ErrorBody } from '../core/settled.ts';
import { closeStreamLease, openStreamLease } from './limits.ts';
import { queueObject, type Ctx } from './plane.ts';
import { SSE_HEADERS } from '../core/sse.ts';

export async function relayStream(c: Ctx, ns: string, queue: string, path: string, params: Record<string, string>): Promise<Response> {
  const lease = await openStreamLease(c, c.get('principal'));
  const q = new URLSearchParams({ ...params, gate: lease.key, lease: lease.id });
  const res = await queueObject(c, ns, queue)
    .fetch(`https://queue${path}?${q}`)
    .catch((e: unknown) => {
      closeStreamLease(c, lease);
      throw e;
    });
  if (!res.ok) {
    closeStreamLease(c, lease);
    throw errorOf(((await res.json()) as { error: ErrorBody }).error);
  }
  return new Response(res.body, { headers: SSE_HEADERS });
}
