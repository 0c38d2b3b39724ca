/**
 * Per-token request rate and open-stream limits, enforced by the token's gate object
 * (src/durable/gate.ts). Exceeding either answers 429 with Retry-After and changes nothing.
 * Root and scoped tokens each have their own budget; a token created with `limits` has its own.
 *
 * Requests: an isolate takes permits from the gate in leases of about 20 ms of the token's rate
 * and spends them locally, so a busy client costs the gate one call per lease, not per request.
 * A permit leased but not spent is at most that much burst above the limit.
 */
import { LakeshoreError } from '../core/errors.ts';
import type { Principal } from '../core/tokens.ts';
import type { TokenGate } from '../durable/gate.ts';
import { settingsFrom } from '../durable/settings.ts';
import type { Ctx } from './plane.ts';

const held = new Map<string, number>();

export const gateKey = (p: Principal) => (p.kind === 'root' ? 'root' : `token:${p.id}`);

function gate(c: Ctx, key: string): DurableObjectStub<TokenGate> {
  const ns = c.env.GATE as unknown as DurableObjectNamespace<TokenGate>;
  return ns.get(ns.idFromName(key));
}

const rateLimited = (message: string, retryAfterMs: number) => new LakeshoreError('rate_limited', message, { retryAfterMs });

/** The caller's limits: its token's own where set, else the plane's (LIMIT_* vars). */
function limitsOf(c: Ctx, p: Principal) {
  const d = settingsFrom(c.env).http;
  const own = p.kind === 'token' ? p.limits : null;
  return { rate: own?.requests_per_second ?? d.requestsPerSecond, burst: own?.request_burst ?? d.requestBurst, streams: own?.streams ?? d.streamsPerToken };
}

/** Spends one request permit of the caller's token, or throws 429. */
export async function admit(c: Ctx, p: Principal): Promise<void> {
  const { rate, burst } = limitsOf(c, p);
  const key = gateKey(p);
  const have = held.get(key) ?? 0;
  if (have > 0) {
    held.set(key, have - 1);
    return;
  }
  const lease = Math.max(1, Math.min(burst, Math.floor(rate / 50)));
  const r = await gate(c, key).take(lease, rate, burst);
  if (r.granted === 0) {
    throw rateLimited(`this token is over its limit of ${rate} requests per second (burst ${burst}); retry after the time in Retry-After`, r.retryAfterMs);
  }
  held.set(key, r.granted - 1);
}

/**
 * Opens a stream lease for the caller's token (or throws 429). The queue object that serves the
 * stream renews it while the stream lives and closes it when the stream ends (see sse.ts); the
 * caller closes it if the stream never starts.
 */
export async function openStreamLease(c: Ctx, p: Principal): Promise<{ gate: string; lease: string; close: () => Promise<void> }> {
  const max = limitsOf(c, p).streams;
  const key = gateKey(p);
  const g = gate(c, key);
  const lease = await g.openStream(max);
  if (lease === null) throw rateLimited(`this token already has ${max} journal streams open; close one or retry later`, 1000);
  return { gate: key, lease, close: () => g.closeStream(lease) };
}
