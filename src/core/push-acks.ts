/**
 * A pusher's acks (push.ts): the 2xx answers waiting for their ack. The next claim takes them
 * along (one write for both); those it does not take are written together after a moment, one
 * write at a time (group commit). A write that fails as a whole is tried again (an ack is
 * idempotent), and after a few tries the ack counts as refused: its lease then brings the job back.
 */
import type { Claimed } from './types.ts';

/** A 2xx answer's ack: the attempt, and the answer's body as its result. */
export interface Ack {
  c: Claimed;
  result: Uint8Array | null;
}

/** Most acks in one write. */
const MAX_ACKS = 100;
/** How long an answered delivery's ack waits for a claim to go with before it is written alone. */
const ACK_LINGER_MS = 5;
/** Writes of one ack before it counts as refused (its lease then brings the job back). */
const ACK_TRIES = 3;
/** The pause before acks whose write failed are written again (or sooner, by the next claim). */
const AGAIN_MS = 100;

/** An ack waiting: told its answer (null when acked) once a write has it. */
export type PendingAck = Ack & { done: (e: Error | null) => void; tries: number };

export class PushAcks {
  private waiting: PendingAck[] = [];
  private writing = false;
  private timer: ReturnType<typeof setTimeout> | null = null;
  private readonly write: (items: Ack[]) => Promise<(Error | null)[]>;

  /** `write`: acks these attempts in one write, answering per item (PushPort.ackMany). */
  constructor(write: (items: Ack[]) => Promise<(Error | null)[]>) {
    this.write = write;
  }

  /** Acks the attempt with the others answered meanwhile; rejects when its ack was refused. */
  add(c: Ack['c'], result: Uint8Array | null): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      this.waiting.push({ c, result, tries: 0, done: (e) => (e ? reject(e) : resolve()) });
      this.flushIn(ACK_LINGER_MS);
    });
  }

  /** The acks a claim takes along (at most one write's worth); the caller tells each its answer. */
  take(): PendingAck[] {
    const out = this.waiting.splice(0, MAX_ACKS);
    if (!this.waiting.length && this.timer) {
      clearTimeout(this.timer);
      this.timer = null;
    }
    return out;
  }

  /** Acks whose write failed as a whole: written again, refused after a few tries. */
  again(acks: PendingAck[], e: unknown): void {
    if (!acks.length) return;
    const err = e instanceof Error ? e : new Error(String(e));
    for (const a of acks) {
      if (++a.tries >= ACK_TRIES) a.done(err);
      else this.waiting.push(a);
    }
    if (this.waiting.length) this.flushIn(AGAIN_MS);
  }

  private flushIn(ms: number): void {
    this.timer ??= setTimeout(() => {
      this.timer = null;
      void this.flush();
    }, ms);
  }

  /** Writes the acks waiting (those no claim took along), one write at a time. */
  private async flush(): Promise<void> {
    if (this.writing) return;
    this.writing = true;
    try {
      for (let batch = this.take(); batch.length; batch = this.take()) {
        try {
          const out = await this.write(batch);
          for (const [k, a] of batch.entries()) a.done(out[k] ?? null);
        } catch (e) {
          this.again(batch, e);
          return;
        }
      }
    } finally {
      this.writing = false;
    }
  }
}
