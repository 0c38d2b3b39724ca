/**
 * Push delivery (docs/contract.md, "Push delivery"): a worker that lives in the plane. It claims
 * the queue's jobs with a lease as any worker does, POSTs each to the queue's push target, signed
 * per Standard Webhooks, and settles it by the answer: a 2xx acks (its body the result), 202 leaves
 * it to the receiver (which finishes with its delivery token), anything else, a timeout or a
 * dropped connection nacks with retry under the queue's attempt budget and backoff (`Retry-After`
 * sets the delay). The acks and nacks go through the same fencing as a worker's.
 *
 * With a batch size above 1, each delivery is a `lakeshore.batch` of up to that many jobs claimed
 * together, and its answer settles each: a 2xx acks every job its body does not name otherwise
 * (`{"outcomes": {"<id>": {"status": "ok" | "retry" | "accepted", ...}}}`), 202 leaves them all to
 * the receiver, anything else retries them all.
 *
 * Platform-neutral: the edge plane's queue object runs it on its engine (src/durable/pushing.ts),
 * and `lakeshore push` runs it on a local plane's file through a Dispatch.
 */
import { PushAcks } from './push-acks.ts';
import { Deliveries, LEASE_SLACK_MS } from './push-delivery.ts';
import type { PushOptions, PushPort, PushStats } from './push-port.ts';
import type { PushTarget } from './push-target.ts';
import type { Claimed } from './types.ts';

export type { Ack } from './push-acks.ts';
export type { Delivered } from './push-wire.ts';

export { PUSH_WORKER_ID } from './push-port.ts';
export type { PushOptions, PushPort, PushStats } from './push-port.ts';

/** The delay before the pusher asks again after its plane failed a claim, doubling to this. */
const MAX_PAUSE_MS = 5_000;
/** How long a claim that may find the queue empty waits for an answer first (Pusher.pauseNext). */
const SETTLE_MS = 5;
/**
 * Envelope bytes of the deliveries on their way past which the pusher claims no more until some
 * are answered. A delivery holds its jobs' envelopes (and their base64 request body) until its
 * answer: `concurrency` deliveries of 16 MiB claims would pass an isolate's 128 MB. At most this
 * and one claim (CLAIM_BYTES) are on their way at once.
 */
export const PUSH_BYTES = 16 << 20;

export class Pusher {
  private target: PushTarget;
  private readonly port: PushPort;
  private readonly o: PushOptions;
  private readonly now: () => number;
  private inFlight = 0;
  private stopped = false;
  private running = false;
  private claimAbort = new AbortController();
  /**
   * The last claim took fewer jobs than it asked for: the queue had no more then. The next one
   * asks for one delivery's worth: a claim that parks rides along with each submit
   * (core/handoff.ts), and a small one costs that submit less. A full claim asks for all again.
   */
  private dry = false;
  /**
   * The last claim came back with jobs but perhaps no more behind them (it was short, or small):
   * the next waits for an answer, or a moment (SETTLE_MS). Asked at once, it would most likely
   * read an empty queue in the very moment the plane answers the submit that woke the last one
   * and makes its delivery, and delay both.
   */
  private pauseNext = false;
  private freed: (() => void) | null = null;
  /** The envelope bytes of the deliveries on their way (PUSH_BYTES). */
  private inFlightBytes = 0;
  /** Whether the loop waits for deliveries to be answered because of their bytes. */
  private heldBack = false;
  /** Deliveries on their way, for stop() to wait on. */
  private readonly pending = new Set<Promise<void>>();
  /** 2xx answers waiting for their ack: they ride the next claim, or are written together. */
  private readonly acks: PushAcks;
  /** The deliveries made: each one's POST and settling, and their figures. */
  private readonly deliveries: Deliveries;

  constructor(port: PushPort, target: PushTarget, o: PushOptions) {
    this.port = port;
    this.target = target;
    this.o = o;
    this.now = o.now ?? Date.now;
    this.acks = new PushAcks((items) => port.ackMany(items));
    this.deliveries = new Deliveries(port, o, this.acks, this.now);
  }

  /** Starts the claim loop (again, after stop()). */
  start(): void {
    this.stopped = false;
    if (this.running) return;
    this.running = true;
    void this.loop()
      .catch((e) => this.deliveries.noteError('', null, `the pusher stopped: ${e instanceof Error ? e.message : String(e)}`))
      .finally(() => {
        this.running = false;
        // Whatever threw (a runtime limit, say), the queue's jobs still need pushing: start again soon.
        if (!this.stopped) setTimeout(() => !this.stopped && this.start(), MAX_PAUSE_MS);
      });
  }

  /** A changed target (URL, concurrency, timeout, secrets): the next claim uses it. */
  retarget(t: PushTarget): void {
    this.target = t;
    this.claimAbort.abort();
    this.freed?.();
  }

  /** Stops claiming; deliveries on their way finish (the promise resolves when they have). */
  async stop(): Promise<void> {
    this.stopped = true;
    this.claimAbort.abort();
    this.freed?.();
    await Promise.allSettled([...this.pending]);
  }

  get active(): boolean {
    return !this.stopped;
  }

  stats(): PushStats {
    return {
      url: this.target.url,
      concurrency: this.target.concurrency,
      inFlight: this.inFlight,
      delivered: { ...this.deliveries.delivered },
      lastError: this.deliveries.lastError,
      latencyMs: this.deliveries.latencyMs(),
    };
  }

  /** Whether any delivery is on its way to the receiver. */
  get delivering(): boolean {
    return this.inFlight > 0;
  }

  /** What the deliveries on their way hold, and whether the pusher waits for room because of it. */
  get held(): { bytes: number; heldBack: boolean } {
    return { bytes: this.inFlightBytes, heldBack: this.heldBack };
  }

  private async loop(): Promise<void> {
    let pause = 0;
    while (!this.stopped) {
      const concurrency = this.target.concurrency;
      const free = concurrency - this.inFlight;
      if (this.inFlight > 0 && this.inFlightBytes >= PUSH_BYTES) {
        this.heldBack = true;
        await new Promise<void>((r) => (this.freed = r));
        this.freed = null;
        this.heldBack = false;
        continue;
      }
      // Claims wait until half the slots are free (or none is busy): fewer, larger claims, each
      // carrying the acks answered meanwhile, in one write. The ack timer writes acks that would
      // wait longer than a moment.
      if (this.pauseNext && this.inFlight > 0) {
        this.pauseNext = false;
        let timer: ReturnType<typeof setTimeout> | undefined;
        await new Promise<void>((r) => {
          this.freed = r;
          timer = setTimeout(r, SETTLE_MS);
        });
        if (timer !== undefined) clearTimeout(timer);
        this.freed = null;
        continue;
      }
      if (free < (this.inFlight === 0 ? 1 : Math.max(1, Math.floor(concurrency / 2)))) {
        await new Promise<void>((r) => (this.freed = r));
        this.freed = null;
        continue;
      }
      if (this.claimAbort.signal.aborted) this.claimAbort = new AbortController();
      const leaseMs = Math.min(this.o.maxLeaseMs, Math.max(this.o.leaseMs, this.target.timeoutMs + LEASE_SLACK_MS));
      const acks = this.acks.take();
      // The batch size as claimed: a retarget during the claim must not split its jobs into more
      // deliveries than the slots it was sized for.
      const batch = this.target.batchSize;
      let got: Claimed[];
      try {
        const max = this.dry ? batch : Math.max(1, Math.min(this.o.maxClaim ?? 1_000, free * batch));
        if (acks.length) {
          const out = await this.port.ackAndClaim(acks, max, leaseMs, 0);
          for (const [k, a] of acks.entries()) a.done(out.acks[k] ?? null);
          got = out.claimed;
        } else got = await this.port.claim(max, leaseMs, this.o.waitMs ?? 25_000, this.claimAbort.signal);
        this.pauseNext = got.length > 0 && (got.length < max || this.dry);
        this.dry = got.length < max;
        pause = 0;
      } catch (e) {
        this.acks.again(acks, e);
        if (this.stopped || this.claimAbort.signal.aborted) continue;
        // The plane could not claim (a move's fence, D1 away): ask again, less often while it lasts.
        pause = Math.min(MAX_PAUSE_MS, pause ? pause * 2 : 100);
        this.deliveries.noteError('', null, `claim failed: ${e instanceof Error ? e.message : String(e)}`);
        await new Promise((r) => setTimeout(r, pause));
        continue;
      }
      // A slot per delivery: one job each, or up to the batch size together.
      const batched = batch > 1;
      if (got.length) this.o.onDelivering?.();
      for (let k = 0; k < got.length; k += batch) {
        const cs = got.slice(k, k + batch);
        const size = cs.reduce((n, c) => n + c.envelope.length, 0);
        this.inFlight++;
        this.inFlightBytes += size;
        let held = true;
        // The slot frees when the receiver has answered (its ack may go with the next claim).
        const release = () => {
          if (!held) return;
          held = false;
          this.inFlight--;
          this.inFlightBytes -= size;
          this.freed?.();
        };
        const p = this.deliveries.deliver(this.target, cs, batched, release).finally(() => {
          release();
          this.pending.delete(p);
        });
        this.pending.add(p);
      }
    }
  }
}
