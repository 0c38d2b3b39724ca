/**
 * Push delivery (docs/contract.md, "Push delivery"): a worker that lives in the plane. It claims
 * the queue's jobs with a lease as any worker does, POSTs each to the queue's push target, signed
 * per Standard Webhooks, and settles it by the answer: a 2xx acks (its body the result), 202 leaves
 * it to the receiver (which finishes with its delivery token), anything else, a timeout or a
 * dropped connection nacks with retry under the queue's attempt budget and backoff (`Retry-After`
 * sets the delay). The acks and nacks go through the same fencing as a worker's.
 *
 * Platform-neutral: the edge plane's queue object runs it on its engine (src/durable/pushing.ts),
 * and `lakeshore push` runs it on a local plane's file through a Dispatch.
 */
import { toBase64, utf8 } from './bytes.ts';
import type { PushTarget } from './push-target.ts';
import { signDelivery } from './push-target.ts';
import type { Claimed, InvocationError } from './types.ts';
import type { LogLine } from './feed.ts';

/** The worker id a plane's pusher claims as (the workers list shows it; a delivery names it). */
export const PUSH_WORKER_ID = 'lakeshore-push';

/** A 2xx answer's ack: the attempt, and the answer's body as its result. */
export interface Ack {
  c: Claimed;
  result: Uint8Array | null;
}

/** What a pusher needs of its plane. */
export interface PushPort {
  /** Claims up to `max` jobs for `workerId`, waiting up to `waitMs` for one; `signal` calls the wait off. */
  claim(max: number, leaseMs: number, waitMs: number, signal: AbortSignal): Promise<Claimed[]>;
  /**
   * Acks these attempts in one write: per item, null when acked, or why it was refused (its
   * attempt is no longer held: the lease ran out, or it was cancelled).
   */
  ackMany(items: Ack[]): Promise<(Error | null)[]>;
  /** The acks and the next claim in one write (the claim waits at most a moment for work). */
  ackAndClaim(acks: Ack[], max: number, leaseMs: number, waitMs: number): Promise<{ acks: (Error | null)[]; claimed: Claimed[] }>;
  /** Nacks the attempt: with `retry`, under the queue's budget, after `delayMs` (null: the queue's backoff). */
  nack(c: Claimed, error: InvocationError, retry: boolean, delayMs: number | null): Promise<void>;
  /** The receiver's credential for this job and attempt (append, heartbeat, ack, nack), or null. */
  deliveryToken(c: Claimed): Promise<string | null>;
  fetch(url: string, init: RequestInit): Promise<Response>;
}

export interface PushOptions {
  ns: string;
  queue: string;
  workerId: string;
  /** The claim lease the queue gives its workers; a delivery's lease also outlasts its request timeout. */
  leaseMs: number;
  maxLeaseMs: number;
  /** Most bytes of a 2xx body kept as the result (the plane's result limit). */
  resultBytes: number;
  maxDelayMs: number;
  now?: () => number;
  /** How long one claim waits for work before it asks again. */
  waitMs?: number;
  /** Told of each delivery's outcome (the feed's log line). */
  onDelivered?: (d: Delivered) => void;
}

/** One delivery's outcome. */
export interface Delivered {
  id: string;
  attempt: number;
  /** The receiver's HTTP status; null when none came (timeout, connection). */
  status: number | null;
  ms: number;
  /** acked (2xx), accepted (202: the receiver finishes it), nacked (retried or failed per the budget), refused (its answer came after the lease). */
  outcome: 'acked' | 'accepted' | 'nacked' | 'refused';
  error?: string;
}

/** A push queue's figures for the operator view: in flight, outcomes, the last error, receiver latency. */
export interface PushStats {
  url: string;
  concurrency: number;
  inFlight: number;
  delivered: Record<Delivered['outcome'], number>;
  lastError: { at: number; id: string; status: number | null; message: string } | null;
  /** The receiver's answer time over the last deliveries (ms): p50 and p99, null before any. */
  latencyMs: { p50: number; p99: number } | null;
}

const LATENCIES = 256;
/** Most acks in one write. */
const MAX_ACKS = 100;
/** How long an answered delivery's ack waits for a claim to go with before it is written alone. */
const ACK_LINGER_MS = 5;
/** Writes of one ack before it counts as refused (its lease then brings the job back). */
const ACK_TRIES = 3;
/** The delay before the pusher asks again after its plane failed a claim, doubling to this. */
const MAX_PAUSE_MS = 5_000;

/** A `Retry-After` (seconds, or an HTTP date) as a delay in ms; null when absent or unreadable. */
export function retryAfterMs(v: string | null, now: number, max: number): number | null {
  if (!v) return null;
  const s = v.trim();
  const ms = /^\d+$/.test(s) ? Number(s) * 1000 : Date.parse(s) - now;
  return Number.isFinite(ms) ? Math.min(max, Math.max(0, Math.round(ms))) : null;
}

/** The result a 2xx body stands for: JSON kept as it came, other text as a JSON string, nothing as none. */
function resultOf(body: Uint8Array, contentType: string | null): Uint8Array | null {
  if (!body.length) return null;
  const text = new TextDecoder().decode(body);
  if (/\bjson\b/i.test(contentType ?? '')) {
    try {
      JSON.parse(text);
      return body;
    } catch {
      /* not JSON after all: kept as text */
    }
  }
  return utf8(JSON.stringify(text));
}

export class Pusher {
  private target: PushTarget;
  private readonly port: PushPort;
  private readonly o: PushOptions;
  private readonly now: () => number;
  private inFlight = 0;
  private stopped = false;
  private running = false;
  private claimAbort = new AbortController();
  private freed: (() => void) | null = null;
  private readonly delivered: PushStats['delivered'] = { acked: 0, accepted: 0, nacked: 0, refused: 0 };
  private lastError: PushStats['lastError'] = null;
  private readonly latencies: number[] = [];
  /** Deliveries on their way, for stop() to wait on. */
  private readonly pending = new Set<Promise<void>>();
  /** 2xx answers waiting for their ack: written together, one write at a time (group commit). */
  private acks: (Ack & { done: (e: Error | null) => void; tries: number })[] = [];
  private acking = false;
  private ackTimer: ReturnType<typeof setTimeout> | null = null;

  constructor(port: PushPort, target: PushTarget, o: PushOptions) {
    this.port = port;
    this.target = target;
    this.o = o;
    this.now = o.now ?? Date.now;
  }

  /** Starts the claim loop (again, after stop()). */
  start(): void {
    this.stopped = false;
    if (this.running) return;
    this.running = true;
    void this.loop()
      .catch((e) => this.noteError('', null, `the pusher stopped: ${e instanceof Error ? e.message : String(e)}`))
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
    const l = [...this.latencies].sort((a, b) => a - b);
    const at = (q: number) => l[Math.min(l.length - 1, Math.floor(q * l.length))]!;
    return {
      url: this.target.url,
      concurrency: this.target.concurrency,
      inFlight: this.inFlight,
      delivered: { ...this.delivered },
      lastError: this.lastError,
      latencyMs: l.length ? { p50: at(0.5), p99: at(0.99) } : null,
    };
  }

  private async loop(): Promise<void> {
    let pause = 0;
    while (!this.stopped) {
      const concurrency = this.target.concurrency;
      const free = concurrency - this.inFlight;
      // Claims wait until half the slots are free (or none is busy): fewer, larger claims, each
      // carrying the acks answered meanwhile, in one write. The ack timer writes acks that would
      // wait longer than a moment.
      if (free < (this.inFlight === 0 ? 1 : Math.max(1, Math.floor(concurrency / 2)))) {
        await new Promise<void>((r) => (this.freed = r));
        this.freed = null;
        continue;
      }
      if (this.claimAbort.signal.aborted) this.claimAbort = new AbortController();
      const leaseMs = Math.min(this.o.maxLeaseMs, Math.max(this.o.leaseMs, this.target.timeoutMs + 5_000));
      const acks = this.takeAcks();
      let got: Claimed[];
      try {
        if (acks.length) {
          const out = await this.port.ackAndClaim(acks, free, leaseMs, 0);
          for (const [k, a] of acks.entries()) a.done(out.acks[k] ?? null);
          got = out.claimed;
        } else got = await this.port.claim(free, leaseMs, this.o.waitMs ?? 25_000, this.claimAbort.signal);
        pause = 0;
      } catch (e) {
        this.ackAgain(acks, e);
        if (this.stopped || this.claimAbort.signal.aborted) continue;
        // The plane could not claim (a move's fence, D1 away): ask again, less often while it lasts.
        pause = Math.min(MAX_PAUSE_MS, pause ? pause * 2 : 100);
        this.noteError('', null, `claim failed: ${e instanceof Error ? e.message : String(e)}`);
        await new Promise((r) => setTimeout(r, pause));
        continue;
      }
      for (const c of got) {
        this.inFlight++;
        let held = true;
        // The slot frees when the receiver has answered (its ack may go with the next claim).
        const release = () => {
          if (!held) return;
          held = false;
          this.inFlight--;
          this.freed?.();
        };
        const p = this.deliver(c, release).finally(() => {
          release();
          this.pending.delete(p);
        });
        this.pending.add(p);
      }
    }
  }

  /** Acks the attempt with the others answered meanwhile; rejects when its ack was refused. */
  private ack(c: Claimed, result: Uint8Array | null): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      this.acks.push({ c, result, tries: 0, done: (e) => (e ? reject(e) : resolve()) });
      this.ackTimer ??= setTimeout(() => {
        this.ackTimer = null;
        void this.flushAcks();
      }, ACK_LINGER_MS);
    });
  }

  private takeAcks() {
    const out = this.acks.splice(0, MAX_ACKS);
    if (!this.acks.length && this.ackTimer) {
      clearTimeout(this.ackTimer);
      this.ackTimer = null;
    }
    return out;
  }

  /** Acks whose write failed as a whole: written again (an ack is idempotent), refused after a few tries. */
  private ackAgain(acks: Pusher['acks'], e: unknown) {
    if (!acks.length) return;
    const err = e instanceof Error ? e : new Error(String(e));
    for (const a of acks) {
      if (++a.tries >= ACK_TRIES) a.done(err);
      else this.acks.push(a);
    }
    if (this.acks.length) {
      // Retried after a pause, by the timer (or sooner, by the next claim).
      this.ackTimer ??= setTimeout(() => {
        this.ackTimer = null;
        void this.flushAcks();
      }, 100);
    }
  }

  /** Writes the acks waiting (those the claim did not take along), one write at a time. */
  private async flushAcks(): Promise<void> {
    if (this.acking) return;
    this.acking = true;
    try {
      for (let batch = this.takeAcks(); batch.length; batch = this.takeAcks()) {
        try {
          const out = await this.port.ackMany(batch);
          for (const [k, a] of batch.entries()) a.done(out[k] ?? null);
        } catch (e) {
          this.ackAgain(batch, e);
          return;
        }
      }
    } finally {
      this.acking = false;
    }
  }

  private noteError(id: string, status: number | null, message: string) {
    this.lastError = { at: this.now(), id, status, message };
  }

  /** POSTs one job and settles it by the answer. Never throws. */
  private async deliver(c: Claimed, answered: () => void): Promise<void> {
    const t = this.target;
    const t0 = this.now();
    let status: number | null = null;
    const done = async (outcome: Delivered['outcome'], settle: () => Promise<void>, error?: string) => {
      let out = outcome;
      let why = error;
      answered();
      try {
        await settle();
      } catch (e) {
        // The attempt is no longer ours (the receiver took longer than the lease, or it was cancelled): refused, like a late worker.
        out = 'refused';
        why = `${error ? `${error}; ` : ''}its ${outcome === 'acked' ? 'ack' : 'nack'} was refused: ${e instanceof Error ? e.message : String(e)}`;
      }
      const ms = this.now() - t0;
      this.delivered[out]++;
      if (status !== null) {
        this.latencies.push(ms);
        if (this.latencies.length > LATENCIES) this.latencies.shift();
      }
      if (why) this.noteError(c.id, status, why);
      this.o.onDelivered?.({ id: c.id, attempt: c.attempt, status, ms, outcome: out, ...(why ? { error: why } : {}) });
    };
    const nack = (message: string, retry = true, delayMs: number | null = null) =>
      done(
        'nacked',
        () => this.port.nack(c, { message, type: 'PushFailed', ...(status !== null ? { status } : {}) }, retry, delayMs),
        message,
      );
    // One timer for the request and its body, cleared when it is done: a runtime bounds the timers
    // alive at once (workerd: 10,000 per isolate), and AbortSignal.timeout's would outlive the request.
    const abort = new AbortController();
    const timer = setTimeout(() => abort.abort(new DOMException('push target timed out', 'TimeoutError')), t.timeoutMs);
    try {
      const token = await this.port.deliveryToken(c);
      const body = JSON.stringify({
        type: 'lakeshore.delivery',
        id: c.id,
        namespace: this.o.ns,
        queue: this.o.queue,
        attempt: c.attempt,
        lease_until: c.leaseUntil,
        priority: c.priority,
        envelope: toBase64(c.envelope),
        worker_id: this.o.workerId,
        delivery_token: token,
      });
      const msgId = `${c.id}.${c.attempt}`;
      const ts = Math.floor(this.now() / 1000);
      const res = await this.port.fetch(t.url, {
        method: 'POST',
        redirect: 'manual',
        signal: abort.signal,
        headers: {
          'content-type': 'application/json',
          'user-agent': 'lakeshore-push/1',
          'webhook-id': msgId,
          'webhook-timestamp': String(ts),
          'webhook-signature': await signDelivery(t.secrets, msgId, ts, body),
        },
        body,
      });
      status = res.status;
      if (res.status === 202) {
        await res.body?.cancel();
        return await done('accepted', async () => {});
      }
      if (res.status >= 200 && res.status < 300) {
        const length = Number(res.headers.get('content-length') ?? NaN);
        const bytes = length > this.o.resultBytes ? null : new Uint8Array(await res.arrayBuffer());
        if (bytes === null || bytes.length > this.o.resultBytes) {
          if (bytes === null) await res.body?.cancel();
          return await nack(
            `push target answered ${res.status} with ${bytes?.length ?? length} bytes; the result limit is ${this.o.resultBytes}`,
            false,
          );
        }
        const result = resultOf(bytes, res.headers.get('content-type'));
        return await done('acked', () => this.ack(c, result));
      }
      const text = (await res.text().catch(() => '')).slice(0, 500);
      const why =
        res.status >= 300 && res.status < 400
          ? `push target answered ${res.status}: redirects are not followed (set the queue's push.url to where it leads)`
          : `push target answered ${res.status}${text ? `: ${text}` : ''}`;
      return await nack(why, true, retryAfterMs(res.headers.get('retry-after'), this.now(), this.o.maxDelayMs));
    } catch (e) {
      const err = e instanceof Error ? e : new Error(String(e));
      const message =
        err.name === 'TimeoutError' || err.name === 'AbortError'
          ? `push target did not answer within ${t.timeoutMs} ms`
          : `push target could not be reached: ${err.message}`;
      return await nack(message);
    } finally {
      clearTimeout(timer);
    }
  }
}

/** A delivery's outcome as the feed tells it. */
export function deliveryLine(d: Delivered): LogLine {
  const answer = d.status === null ? 'no answer' : `${d.status}`;
  const what =
    d.outcome === 'acked'
      ? 'acked'
      : d.outcome === 'accepted'
        ? 'accepted: the receiver finishes it with its delivery token'
        : d.outcome === 'nacked'
          ? `nacked: ${d.error}`
          : `refused: ${d.error}`;
  return {
    id: d.id,
    level: d.outcome === 'acked' || d.outcome === 'accepted' ? 'info' : 'warn',
    message: `push attempt ${d.attempt}: ${answer} in ${d.ms} ms, ${what}`,
  };
}
