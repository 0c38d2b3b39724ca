/**
 * Request admission against a token's budget, kept by its gate object (src/durable/gate.ts) so it
 * holds across isolates. Each request asks the gate for its own permit, and while the bucket is at
 * least half full the gate adds a spare lease (about 20 ms of the token's rate) that this isolate
 * spends on its next requests without asking: a busy token costs the gate one call per lease.
 *
 * Spare permits come out of the same bucket, so a request the gate refuses takes a spare one this
 * isolate still holds before it is refused: within one isolate, requests within the budget all
 * pass (N concurrent, N within the burst), whatever order their calls reach the gate in. Across
 * isolates, a spare permit held unspent in one is budget another cannot use; the gate hands them
 * out only while the bucket is at least half full. (Requests wait for nothing but their own call:
 * a promise made in one request may not be resolved from another on Workers.)
 *
 * Spare permits last SPARE_MS: so every isolate asks the gate at least that often for each token
 * it serves, and the gate's answer is how a revocation reaches isolates that cached the token
 * (src/worker/auth.ts): within SPARE_MS.
 */
export type Take = (want: number, spare: number) => Promise<{ granted: number; retryAfterMs: number; revoked?: true }>;

/** How long spare permits keep: the bound on how stale an isolate's view of a token's revocation is. */
export const SPARE_MS = 1_000;

export class Admission {
  private held = 0;
  private heldUntil = 0;

  /** Resolves null when admitted, the ms to wait before retrying, or 'revoked'. */
  async admit(take: Take, spare: number, now = Date.now()): Promise<number | null | 'revoked'> {
    if (this.heldUntil <= now) this.held = 0;
    if (this.held > 0) {
      this.held--;
      return null;
    }
    const r = await take(1, spare);
    if (r.revoked) {
      this.held = 0;
      return 'revoked';
    }
    if (r.granted > 0) {
      this.held += r.granted - 1;
      this.heldUntil = Date.now() + SPARE_MS;
      return null;
    }
    if (this.held > 0) {
      this.held--;
      return null;
    }
    return Math.max(1, r.retryAfterMs);
  }
}
