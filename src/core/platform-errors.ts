/**
 * Failures of the platform under the plane that a retry gets past, answered as such rather than
 * as a 500 the clients do not retry. Cloudflare marks a Durable Object call's failure `retryable`
 * (the object restarting for a deploy, a connection dropped) or `overloaded` (too many requests to
 * one object: retrying adds to it), and names D1's transient failures in its guidance on retrying
 * queries. A retry is safe: every verb is (submits carry their id; a holder's calls name their
 * attempt), as for a connection the client saw drop.
 */
import { LakeshoreError } from './errors.ts';

/** D1's transient failures, as Cloudflare's guidance on retrying queries names them. */
const TRANSIENT = ['Network connection lost', 'storage caused object to be reset', 'reset because its code was updated'];
/** D1 overloaded: too many queries queued on one database. */
const D1_OVERLOADED = 'D1 DB is overloaded';

/**
 * The error to answer for a platform failure: 503 `unavailable` for one a retry may get past (the
 * clients retry it), 429 `rate_limited` for an overload (the clients wait its Retry-After first);
 * null for anything else, which stays a 500.
 */
export function platformError(e: unknown): LakeshoreError | null {
  if (!(e instanceof Error) || e instanceof LakeshoreError) return null;
  const flags = e as Error & { retryable?: unknown; overloaded?: unknown };
  if (flags.overloaded === true || e.message.includes(D1_OVERLOADED))
    return new LakeshoreError('rate_limited', `the plane is overloaded here (${e.message}): slow down and retry`, { retryAfterMs: 1000 });
  if (flags.retryable === true || TRANSIENT.some((s) => e.message.includes(s)))
    return new LakeshoreError('unavailable', `the plane was briefly unavailable (${e.message}): retry`, { retryable: true });
  return null;
}
