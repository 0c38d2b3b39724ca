/**
 * Which queues a namespace-wide view answers (`GET /queues`, `/metrics`, `/workers`): those the
 * request names (`?queue=a&queue=b`), else one page of the namespace's (`?after=&limit=`).
 *
 * Each queue such a view answers is one call to its queue object (what it keeps in memory), and
 * Cloudflare bounds the calls one request may make (docs/deploy.md, "Settings"). So no request
 * answers more than MAX_NAMED_QUEUES queues, however many the namespace has: a page says which
 * name to pass as `after` for the next (`next`), and the clients follow it.
 */
import { badRequest } from '../core/errors.ts';
import { MAX_NAMED_QUEUES } from '../core/limits.ts';
import * as v from '../core/validate.ts';
import { numParam } from './body.ts';
import { limitsOf, reader, type Ctx } from './plane.ts';

export interface QueuesAsked {
  queues: string[];
  /** The last name of this page when more follow (pass it as `after`); null when it was the last, or when queues were named. */
  next: string | null;
}

export async function queuesAsked(c: Ctx, ns: string): Promise<QueuesAsked> {
  const limits = limitsOf(c);
  const named = c.req.queries('queue');
  const after = c.req.query('after');
  const limit = c.req.query('limit');
  if (named?.length) {
    if (after !== undefined || limit !== undefined)
      throw badRequest('name the queues (queue=) or page through them (after=, limit=), not both');
    if (named.length > MAX_NAMED_QUEUES)
      throw badRequest(
        `a request names at most ${MAX_NAMED_QUEUES} queues (queue= given ${named.length} times); leave it out for a page of every queue`,
      );
    return { queues: [...new Set(named.map((q) => v.queue(q, limits)))], next: null };
  }
  const size = numParam(c, 'limit');
  const from = await reader(c, ns);
  return await from.queuesPage(ns, after, size);
}
