/**
 * The gate: one Durable Object per token (the root token is "root"), so limits hold across all
 * of a deployment's isolates. It keeps, in memory only (a limit is not data worth persisting):
 *
 * - a token bucket of requests: `rate` per second, up to `burst` at once. Isolates take permits in
 *   small leases (see src/worker/limits.ts), so a request costs a call here only once per lease;
 * - the open SSE streams, as leases that expire unless renewed, so a stream whose isolate died
 *   stops counting by itself.
 */
import { DurableObject } from 'cloudflare:workers';

export const STREAM_LEASE_MS = 60_000;

export interface Taken {
  granted: number;
  /** When nothing was granted: how long until one permit is back. */
  retryAfterMs: number;
  /** The token was revoked: every isolate that asks learns it here (src/worker/auth.ts). */
  revoked?: true;
}

export class TokenGate extends DurableObject<Env> {
  private tokens = -1;
  private at = 0;
  private readonly streams = new Map<string, number>();
  /** When the token was revoked (stored: a revocation outlives this object's restarts). */
  private revokedAt: number | null = null;

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    void ctx.blockConcurrencyWhile(async () => {
      this.revokedAt = (await ctx.storage.get<number>('revoked_at')) ?? null;
    });
  }

  /** The token is revoked: from now on every take answers `revoked` and grants nothing. */
  async revoke(at: number): Promise<void> {
    this.revokedAt = at;
    await this.ctx.storage.put('revoked_at', at);
  }

  /**
   * Grants up to `want` permits from the bucket, plus up to `spare` more while at least half the
   * burst would be left (see src/worker/admission.ts). `retryAfterMs`: when one permit is back.
   */
  take(want: number, spare: number, rate: number, burst: number): Taken {
    if (this.revokedAt !== null) return { granted: 0, retryAfterMs: 0, revoked: true };
    const now = Date.now();
    this.tokens = this.tokens < 0 ? burst : Math.min(burst, this.tokens + ((now - this.at) / 1000) * rate);
    this.at = now;
    const needed = Math.max(0, Math.min(want, Math.floor(this.tokens)));
    const extra = Math.max(0, Math.min(spare, Math.floor(this.tokens - needed - burst / 2)));
    const granted = needed + extra;
    this.tokens -= granted;
    return { granted, retryAfterMs: needed < want ? Math.ceil(((1 - this.tokens) / rate) * 1000) : 0 };
  }

  /** Opens a stream lease unless `max` are open; answers its id, or null. */
  openStream(max: number): string | null {
    const now = Date.now();
    for (const [id, until] of this.streams) if (until <= now) this.streams.delete(id);
    if (this.streams.size >= max) return null;
    const id = crypto.randomUUID();
    this.streams.set(id, now + STREAM_LEASE_MS);
    return id;
  }

  renewStream(id: string): void {
    if (this.streams.has(id)) this.streams.set(id, Date.now() + STREAM_LEASE_MS);
  }

  closeStream(id: string): void {
    this.streams.delete(id);
  }
}

/** An open stream's place at its token's gate: the gate's key and the lease's id. */
export interface StreamLease {
  key: string;
  id: string;
}

/**
 * Keeps a stream lease while its stream lives: `renew` (call it as bytes flow; it calls the gate at
 * most every third of a lease) and `close` (once, at the end). `keep` holds a call's promise alive
 * past the caller's request (waitUntil).
 */
export function leaseKeeper(gates: DurableObjectNamespace<TokenGate>, lease: StreamLease, keep: (p: Promise<unknown>) => void) {
  const g = gates.get(gates.idFromName(lease.key));
  let renewed = Date.now();
  let closed = false;
  return {
    renew: () => {
      if (closed || Date.now() - renewed < STREAM_LEASE_MS / 3) return;
      renewed = Date.now();
      keep(g.renewStream(lease.id).catch(() => {}));
    },
    close: () => {
      if (closed) return;
      closed = true;
      keep(g.closeStream(lease.id).catch(() => {}));
    },
  };
}
