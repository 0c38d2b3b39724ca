/**
 * The claims a client made, by job id: whose (the worker id) and which attempt. A holder's call
 * that names no attempt (ack, nack, heartbeat, a journal append) uses the one kept here.
 *
 * A claim is forgotten once a call of its own attempt ended it, and only then. A job nacked for a
 * retry can be claimed again through the same client (another slot of a worker's concurrency)
 * before the nack's answer is read; forgetting the id then would lose that newer attempt, and a
 * call naming no attempt would find nothing.
 */
export class HeldClaims {
  private readonly byId = new Map<string, { workerId: string; attempt: number }>();

  /** `workerId` claimed `id` at `attempt`. */
  held(id: string, workerId: string, attempt: number): void {
    this.byId.set(id, { workerId, attempt });
  }

  get(id: string): { workerId: string; attempt: number } | undefined {
    return this.byId.get(id);
  }

  /** The attempt a holder's call names: the caller's, else the one `workerId` claimed here. */
  attemptOf(id: string, workerId: string, given: number | undefined): number | null {
    if (given !== undefined) return given;
    const held = this.byId.get(id);
    return held && held.workerId === workerId ? held.attempt : null;
  }

  /** A call of `workerId` at `attempt` ended the job's attempt: its claim is forgotten if it is still the one kept. */
  done(id: string, workerId: string, attempt: number | null): void {
    const held = this.byId.get(id);
    if (held && held.workerId === workerId && held.attempt === attempt) this.byId.delete(id);
  }
}
