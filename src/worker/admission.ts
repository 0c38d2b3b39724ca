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
 */
export type Take = (want: number, spare: number) => Promise<{ granted: number; retryAfterMs: number }>;

export class Admission {
  private held = 0;

  /** Resolves null when admitted, else the ms to wait before retrying. */
  async admit(take: Take, spare: number): Promise<number | null> {
    if (this.held > 0) {
      this.held--;
      return null;
    }
    const r = await take(1, spare);
    if (r.granted > 0) {
      this.held += r.granted - 1;
      return null;
    }
    if (this.held > 0) {
      this.held--;
      return null;
    }
    return Math.max(1, r.retryAfterMs);
  }
}
