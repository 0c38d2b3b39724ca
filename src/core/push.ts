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
import { fromUtf8, readUpTo } from './bytes.ts';
import { PushAcks } from './push-acks.ts';
import { ANSWER_BYTES, AnswerBudget } from './push-answers.ts';
import { type Delivered, deliveryBody, outcomesOf, resultOf, retryAfterMs } from './push-wire.ts';
import { type PushTarget, signDelivery } from './push-target.ts';
import type { PushOptions, PushPort, PushStats, Retried } from './push-port.ts';
import type { Claimed } from './types.ts';

export type { Ack } from './push-acks.ts';
export type { Delivered } from './push-wire.ts';

export { PUSH_WORKER_ID } from './push-port.ts';
export type { PushOptions, PushPort, PushStats } from './push-port.ts';

const LATENCIES = 256;
/** The delay before the pusher asks again after its plane failed a claim, doubling to this. */
const MAX_PAUSE_MS = 5_000;
/** How long a claim that may find the queue empty waits for an answer first (Pusher.pauseNext). */
const SETTLE_MS = 5;
/** Why a 202 to a delivery with no token (a local plane's) is a mistake the operator should hear of. */
const TOKENLESS_202 =
  'a local delivery carries no delivery token to finish it with: it is delivered again once its lease runs out (answer with the outcome instead)';
/** A batch's answer may be this much bigger than its jobs' results together (its JSON around them). */
const BATCH_ANSWER_SLACK = 64 * 1024;
/** What is read of an error answer's body, for the 500 characters the nack's message keeps. */
const ERROR_TEXT_BYTES = 2048;
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
  private readonly delivered: PushStats['delivered'] = { acked: 0, accepted: 0, nacked: 0, refused: 0 };
  private lastError: PushStats['lastError'] = null;
  private readonly latencies: number[] = [];
  /** Deliveries on their way, for stop() to wait on. */
  private readonly pending = new Set<Promise<void>>();
  /** 2xx answers waiting for their ack: they ride the next claim, or are written together. */
  private readonly acks: PushAcks;
  /** The bytes of the 2xx answers being read and settled (ANSWER_BYTES). */
  private readonly answers = new AnswerBudget();

  constructor(port: PushPort, target: PushTarget, o: PushOptions) {
    this.port = port;
    this.target = target;
    this.o = o;
    this.now = o.now ?? Date.now;
    this.acks = new PushAcks((items) => port.ackMany(items));
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
      const leaseMs = Math.min(this.o.maxLeaseMs, Math.max(this.o.leaseMs, this.target.timeoutMs + 5_000));
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
        this.noteError('', null, `claim failed: ${e instanceof Error ? e.message : String(e)}`);
        await new Promise((r) => setTimeout(r, pause));
        continue;
      }
      // A slot per delivery: one job each, or up to the batch size together.
      const batched = batch > 1;
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
        const p = this.deliver(cs, batched, release).finally(() => {
          release();
          this.pending.delete(p);
        });
        this.pending.add(p);
      }
    }
  }

  private noteError(id: string, status: number | null, message: string) {
    this.lastError = { at: this.now(), id, status, message };
  }

  /** Settles one job of a delivery by its outcome, and counts it; never throws. */
  private async settle(
    c: Claimed,
    d: { status: number | null; ms: number; batch: number },
    outcome: Delivered['outcome'],
    write: () => Promise<unknown>,
    error?: string,
  ): Promise<void> {
    let out = outcome;
    let why = error;
    let next: Delivered['next'];
    try {
      // A nack answers what became of the job (port.nack: Retried); an ack, nothing.
      const r = (await write()) as Retried | undefined;
      if (r && outcome === 'nacked') next = { state: r.state, inMs: r.runAt === null ? null : Math.max(0, r.runAt - this.now()) };
    } catch (e) {
      // The attempt is no longer ours (the receiver took longer than the lease, or it was cancelled): refused, like a late worker.
      out = 'refused';
      why = `${error ? `${error}; ` : ''}its ${outcome === 'acked' ? 'ack' : 'nack'} was refused: ${e instanceof Error ? e.message : String(e)}`;
    }
    this.delivered[out]++;
    if (why) this.noteError(c.id, d.status, why);
    this.o.onDelivered?.({
      id: c.id,
      attempt: c.attempt,
      status: d.status,
      ms: d.ms,
      batch: d.batch,
      outcome: out,
      ...(why ? { error: why } : {}),
      ...(next ? { next } : {}),
    });
  }

  private nackOf(c: Claimed, status: number | null, message: string, retry: boolean, delayMs: number | null) {
    return () => this.port.nack(c, { message, type: 'PushFailed', ...(status !== null ? { status } : {}) }, retry, delayMs);
  }

  /**
   * POSTs one delivery (a job, or a batch of them) and settles each job by the answer. Never throws.
   * `answered` frees the delivery's slot once the receiver has answered (the acks may still be on
   * their way: they go with the next claim).
   */
  private async deliver(cs: Claimed[], batched: boolean, answered: () => void): Promise<void> {
    const t = this.target;
    const t0 = this.now();
    const d = { status: null as number | null, ms: 0, batch: cs.length };
    // Once: the answer's time is taken when it is first known (a nack after reading it is not a second).
    let known = false;
    const heard = () => {
      if (known) return;
      known = true;
      d.ms = this.now() - t0;
      if (d.status !== null) {
        this.latencies.push(d.ms);
        if (this.latencies.length > LATENCIES) this.latencies.shift();
      }
      answered();
    };
    const nackAll = (message: string, retry = true, delayMs: number | null = null) => {
      heard();
      return Promise.all(cs.map((c) => this.settle(c, d, 'nacked', this.nackOf(c, d.status, message, retry, delayMs), message)));
    };
    // One timer for the request and its body, cleared when it is done: a runtime bounds the timers
    // alive at once (workerd: 10,000 per isolate), and AbortSignal.timeout's would outlive the request.
    const abort = new AbortController();
    const timer = setTimeout(() => abort.abort(new DOMException('push target timed out', 'TimeoutError')), t.timeoutMs);
    try {
      const tokens = await Promise.all(cs.map((c) => this.port.deliveryToken(c)));
      const body = deliveryBody(cs, tokens, batched, this.o);
      // A job's attempt is in exactly one delivery, so the first job's names its batch uniquely.
      const msgId = `${batched ? 'batch_' : ''}${cs[0]!.id}.${cs[0]!.attempt}`;
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
      d.status = res.status;
      if (res.status === 202) {
        await res.body?.cancel();
        heard();
        // A local plane's delivery carries no token: nothing can finish the job but its lease's end.
        const tokenless = tokens.every((t) => t === null) ? TOKENLESS_202 : undefined;
        await Promise.all(cs.map((c) => this.settle(c, d, 'accepted', async () => {}, tokenless)));
        return;
      }
      if (res.status >= 200 && res.status < 300) {
        const limit = Math.min(ANSWER_BYTES, batched ? cs.length * this.o.resultBytes + BATCH_ANSWER_SLACK : this.o.resultBytes);
        const length = Number(res.headers.get('content-length') ?? NaN);
        const tooLong = async (size: string) => {
          const what = batched ? `; a batch of ${cs.length} may answer ${limit}` : `; the result limit is ${limit}`;
          await nackAll(`push target answered ${res.status} with ${size}${what}`, false);
        };
        if (length > limit) {
          await res.body?.cancel();
          return await tooLong(`${length} bytes`);
        }
        const reserved = Number.isFinite(length) ? length : limit;
        await this.answers.take(reserved, abort.signal);
        try {
          const { bytes, whole } = await readUpTo(res.body, limit);
          if (!whole) return await tooLong(`more than ${limit} bytes`);
          heard();
          await this.settleAnswer(cs, d, res, bytes, batched, nackAll);
        } finally {
          this.answers.give(reserved);
        }
        return;
      }
      // The first of its words: a receiver's error page may be of any size.
      const head = await readUpTo(res.body, ERROR_TEXT_BYTES).catch(() => null);
      const text = head ? fromUtf8(head.bytes).slice(0, 500) : '';
      const why =
        res.status >= 300 && res.status < 400
          ? `push target answered ${res.status}: redirects are not followed (set the queue's push.url to where it leads)`
          : `push target answered ${res.status}${text ? `: ${text}` : ''}`;
      await nackAll(why, true, retryAfterMs(res.headers.get('retry-after'), this.now(), this.o.maxDelayMs));
    } catch (e) {
      const err = e instanceof Error ? e : new Error(String(e));
      const message =
        err.name === 'TimeoutError' || err.name === 'AbortError'
          ? `push target did not answer within ${t.timeoutMs} ms`
          : `push target could not be reached: ${err.message}`;
      await nackAll(message);
    } finally {
      clearTimeout(timer);
    }
  }

  /** Settles a delivery's jobs by its 2xx answer, read whole: its one job acked with the body, or each of a batch as the body says. */
  private async settleAnswer(
    cs: Claimed[],
    d: { status: number | null; ms: number; batch: number },
    res: Response,
    bytes: Uint8Array,
    batched: boolean,
    nackAll: (message: string, retry?: boolean) => Promise<unknown>,
  ): Promise<void> {
    if (!batched) {
      const c = cs[0]!;
      const result = resultOf(bytes, res.headers.get('content-type'));
      if (result && result.length > this.o.resultBytes) {
        // Text is kept as a JSON string: its quotes and escapes may carry it past the limit.
        const why = `push target answered ${res.status} with ${bytes.length} bytes of text, ${result.length} as the JSON string kept as its result; the result limit is ${this.o.resultBytes}`;
        await nackAll(why, false);
        return;
      }
      await this.settle(c, d, 'acked', () => this.acks.add(c, result));
      return;
    }
    const outcomes = outcomesOf(bytes, this.o.resultBytes, this.o.maxDelayMs);
    await Promise.all(
      cs.map((c) => {
        const o = outcomes.get(c.id) ?? { status: 'ok', result: null };
        if (o.status === 'ok') return this.settle(c, d, 'acked', () => this.acks.add(c, o.result));
        if (o.status === 'accepted') return this.settle(c, d, 'accepted', async () => {});
        if (o.status === 'retry') {
          const why = `push target answered ${res.status} and asked to retry it${o.error ? `: ${o.error}` : ''}`;
          return this.settle(c, d, 'nacked', this.nackOf(c, d.status, why, true, o.delayMs), why);
        }
        const why = `push target answered ${res.status}: ${o.error}`;
        return this.settle(c, d, 'nacked', this.nackOf(c, d.status, why, o.retry, null), why);
      }),
    );
  }
}
