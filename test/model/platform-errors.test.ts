/**
 * Which platform failures are answered as passing (core/platform-errors.ts): a Durable Object
 * call's failure Cloudflare marks `retryable` or `overloaded`, and D1's transient errors by the
 * words of Cloudflare's guidance. The edge tier sees D1's through a queue object
 * (test/edge/platform-errors.test.ts); a stub's flags cannot be made to fail there.
 */
import { describe, expect, it } from 'vitest';
import { LakeshoreError } from '../../src/core/errors.ts';
import { platformError } from '../../src/core/platform-errors.ts';

const flagged = (message: string, flags: Record<string, boolean>) => Object.assign(new Error(message), flags);

describe('platform failures', () => {
  it('a Durable Object call marked retryable is a 503 the clients retry; one marked overloaded a 429 with Retry-After', () => {
    const reset = platformError(flagged('Durable Object reset because its code was updated.', { retryable: true }));
    expect(reset?.code).toBe('unavailable');
    expect(reset?.message).toMatch(/reset because its code was updated/);
    const busy = platformError(flagged('Durable Object is overloaded. Too many requests queued.', { overloaded: true, retryable: false }));
    expect(busy?.code).toBe('rate_limited');
    expect(busy?.retryAfterMs).toBe(1000);
    // Overloaded wins over retryable: retrying at once adds to the load.
    expect(platformError(flagged('x', { overloaded: true, retryable: true }))?.code).toBe('rate_limited');
  });

  it("D1's transient errors by Cloudflare's words; anything else, a LakeshoreError or a non-error stays as it was", () => {
    for (const m of [
      'D1_ERROR: Network connection lost.',
      'D1_ERROR: Internal error while starting up D1 DB storage caused object to be reset.',
      'D1_ERROR: D1 DB reset because its code was updated.',
    ])
      expect(platformError(new Error(m))?.code, m).toBe('unavailable');
    expect(platformError(new Error('D1_ERROR: D1 DB is overloaded. Requests queued for too long.'))?.code).toBe('rate_limited');
    expect(platformError(new Error('D1_ERROR: UNIQUE constraint failed: invocations.ns, invocations.id'))).toBeNull();
    expect(platformError(flagged('thrown by the object itself', { remote: true }))).toBeNull();
    expect(platformError(new LakeshoreError('conflict', 'Network connection lost'))).toBeNull();
    expect(platformError('Network connection lost')).toBeNull();
  });
});
