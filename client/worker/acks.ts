/**
 * A worker's acks of finished jobs. While the worker claims, an ack waits here for its next claim
 * on the job's queue and goes with it (`ackAndClaim`: one request, one storage batch); when no
 * claim is about to go, the acks waiting go on their own.
 */
import type { Claimed, DispatchPlane } from '../types.ts';

export interface PendingAck {
  c: Claimed;
  result: Uint8Array;
  /** Settles the handler's ack: null when it landed. */
  done: (e: Error | null) => void;
}

export class AckLane {
  private readonly d: DispatchPlane;
  private readonly workerId: string;
  /** Told when an ack starts waiting: the claim loop may send it now. */
  private readonly waiting: () => void;
  private pending: PendingAck[] = [];
  /** False once the worker claims no more: acks go alone, at once. */
  claiming = true;

  constructor(d: DispatchPlane, workerId: string, waiting: () => void) {
    this.d = d;
    this.workerId = workerId;
    this.waiting = waiting;
  }

  /** Acks a finished job: with the next claim on its queue while the worker claims, else alone. */
  ack(c: Claimed, result: Uint8Array): Promise<void> {
    if (!this.claiming) return this.alone(c, result);
    return new Promise<void>((resolve, reject) => {
      this.pending.push({ c, result, done: (e) => (e ? reject(e) : resolve()) });
      this.waiting();
    });
  }

  /** Takes up to `max` of the waiting acks of `queue`, to ride a claim on it. */
  take(queue: string, max: number): PendingAck[] {
    const riding: PendingAck[] = [];
    const stay: PendingAck[] = [];
    for (const a of this.pending) (a.c.queue === queue && riding.length < max ? riding : stay).push(a);
    this.pending = stay;
    return riding;
  }

  /** Sends every waiting ack on its own. */
  flush(): void {
    const all = this.pending;
    this.pending = [];
    for (const a of all)
      this.alone(a.c, a.result).then(
        () => a.done(null),
        (e: unknown) => a.done(e instanceof Error ? e : new Error(String(e))),
      );
  }

  private alone(c: Claimed, result: Uint8Array): Promise<void> {
    return this.d.ack(c.id, this.workerId, { attempt: c.attempt, result });
  }
}
