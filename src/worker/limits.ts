/**
 * Per-token request rate and open-stream limits, enforced by the token's gate object
 * (src/durable/gate.ts). Exceeding either answers 429 with Retry-After and changes nothing.
 * Root and scoped tokens each have their own budget; a token created with `limits` has its own.
 * How requests are admitted within an isolate is admission.ts.
 */
import { LakeshoreError } from '../core/errors.ts';
import type { Principal } from '../core/tokens.ts';
import type { StreamLease, TokenGate } from '../durable/gate.ts';
import { settingsFrom } from '../durable/settings.ts';
import { Admission } from './admission.ts';
import type { Ctx } from './plane.ts';
import { later } from './request.ts';
import { forgetToken } from './token-cache.ts';

/** Per token (its gate key), this isolate's admission of requests. */
const admissions = new Map<string, Admission>();

/** The gate of a caller: root's, a stream token's own, a push queue's (all its delivery tokens), or a scoped token's. */
export const gateKey = (p: Principal) =>
  p.kind === 'root'
    ? 'root'
    : p.kind === 'stream'
      ? `stream:${p.jti}`
      : p.kind === 'delivery'
        ? `delivery:${p.ns}\u0000${p.queue}`
        : `token:${p.id}`;

function gate(c: Ctx, key: string): DurableObjectStub<TokenGate> {
  const ns = c.env.GATE as unknown as DurableObjectNamespace<TokenGate>;
  return ns.get(ns.idFromName(key));
}

const rateLimited = (message: string, retryAfterMs: number) => new LakeshoreError('rate_limited', message, { retryAfterMs });

/**
 * The caller's limits: its token's own where set, else the plane's (LIMIT_* vars). A stream token
 * has its own gate, with the plane's request rate and the stream cap it was minted with.
 */
function limitsOf(c: Ctx, p: Principal) {
  const d = settingsFrom(c.env).http;
  const own = p.kind === 'token' ? p.limits : null;
  const streams = p.kind === 'stream' ? p.streams : (own?.streams ?? d.streamsPerToken);
  return { rate: own?.requests_per_second ?? d.requestsPerSecond, burst: own?.request_burst ?? d.requestBurst, streams };
}

/** Tells the token's gate it is revoked: every isolate's next ask refuses it (admission.ts SPARE_MS). */
export async function revokeAtGate(c: Ctx, tokenId: string, at: number): Promise<void> {
  await gate(c, `token:${tokenId}`).revoke(at);
}

/** Spends one request permit of the caller's token, or throws 429 (401 once the token is revoked). */
export async function admit(c: Ctx, p: Principal): Promise<void> {
  const { rate, burst } = limitsOf(c, p);
  const key = gateKey(p);
  let a = admissions.get(key);
  if (!a) {
    if (admissions.size >= 10_000) admissions.clear();
    admissions.set(key, (a = new Admission()));
  }
  const spare = Math.max(0, Math.min(burst, Math.floor(rate / 50)));
  const retryAfterMs = await a.admit((want, extra) => gate(c, key).take(want, extra, rate, burst), spare);
  if (retryAfterMs === 'revoked') {
    if (p.kind === 'token') forgetToken(p.id);
    throw new LakeshoreError('unauthorized', 'invalid or revoked token');
  }
  if (retryAfterMs !== null) {
    throw rateLimited(
      `this token is over its limit of ${rate} requests per second (burst ${burst}); retry after the time in Retry-After`,
      retryAfterMs,
    );
  }
}

/**
 * Opens a stream lease for the caller's token (or throws 429). The queue object serving the stream
 * renews it while the stream lives and closes it when it ends (durable/journal-streams.ts); a lease
 * whose stream died without a word runs out by itself.
 */
export async function openStreamLease(c: Ctx, p: Principal): Promise<StreamLease> {
  const max = limitsOf(c, p).streams;
  const key = gateKey(p);
  const id = await gate(c, key).openStream(max);
  if (id === null) throw rateLimited(`this token already has ${max} journal streams open; close one or retry later`, 1000);
  return { key, id };
}

/** Closes a lease whose stream never started. */
export const closeStreamLease = (c: Ctx, lease: StreamLease) => later(c, gate(c, lease.key).closeStream(lease.id));
