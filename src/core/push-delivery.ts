/**
 * One push delivery (push.ts claims, this delivers): a POST of a job, or of a batch of them, to the
 * queue's push target, signed per Standard Webhooks, and each job settled by the answer. It keeps
 * the figures of the deliveries made: outcomes, the last error, the receiver's answer times.
 */
import { fromUtf8, readUpTo } from './bytes.ts';
import type { PushAcks } from './push-acks.ts';
import { ANSWER_BYTES, Budget } from './push-answers.ts';
import type { PushOptions, PushPort, PushStats, Retried } from './push-port.ts';
import { type PushTarget, signDelivery } from './push-target.ts';
import { type Delivered, deliveryBody, outcomesOf, resultOf, retryAfterMs } from './push-wire.ts';
import type { Claimed } from './types.ts';

const LATENCIES = 256;
/** Why a 202 to a delivery with no token (a local plane's) is a mistake the operator should hear of. */
const TOKENLESS_202 =
  'a local delivery carries no delivery token to finish it with: it is delivered again once its lease runs out (answer with the outcome instead)';
/** A batch's answer may be this much bigger than its jobs' results together (its JSON around them). */
const BATCH_ANSWER_SLACK = 64 * 1024;
/** What is read of an error answer's body, for the 500 characters the nack's message keeps. */
const ERROR_TEXT_BYTES = 2048;
/** A delivery's lease outlasts its request timeout by this much (push.ts claims with it). */
export const LEASE_SLACK_MS = 5_000;

/** A delivery's answer as its jobs are settled: its status and time, and how many jobs it carried. */
interface Answer {
  status: number | null;
  ms: number;
  batch: number;
}

export class Deliveries {
  readonly delivered: PushStats['delivered'] = { acked: 0, accepted: 0, nacked: 0, refused: 0 };
  lastError: PushStats['lastError'] = null;
  private readonly latencies: number[] = [];
  /** The bytes of the 2xx answers being read and settled (ANSWER_BYTES). */
  private readonly answers = new Budget();
  /**
   * The connections its deliveries may hold waiting for their receiver's headers
   * (PushOptions.connections): past them a delivery waits here, its timeout not yet running.
   */
  private readonly connections: Budget;

  private readonly port: PushPort;
  private readonly o: PushOptions;
  /** Collects the 2xx answers' acks: they ride the pusher's next claim. */
  private readonly acks: PushAcks;
  private readonly now: () => number;

  constructor(port: PushPort, o: PushOptions, acks: PushAcks, now: () => number) {
    this.port = port;
    this.o = o;
    this.acks = acks;
    this.now = now;
    this.connections = new Budget(o.connections ?? Number.POSITIVE_INFINITY);
  }

  /** The receiver's answer time over the last deliveries (ms), null before any. */
  latencyMs(): PushStats['latencyMs'] {
    const l = [...this.latencies].sort((a, b) => a - b);
    const at = (q: number) => l[Math.min(l.length - 1, Math.floor(q * l.length))]!;
    return l.length ? { p50: at(0.5), p99: at(0.99) } : null;
  }

  noteError(id: string, status: number | null, message: string): void {
    this.lastError = { at: this.now(), id, status, message };
  }

  /** Settles one job of a delivery by its outcome, and counts it; never throws. */
  private async settle(c: Claimed, d: Answer, outcome: Delivered['outcome'], write: () => Promise<unknown>, error?: string): Promise<void> {
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
   * The delivery waited for a connection into its jobs' leases: each that would run out before its
   * timeout does is extended first (one write each, only after such a wait). A job no longer held
   * (cancelled, or its lease gone) throws: the delivery is not sent.
   */
  private async keepLeases(t: PushTarget, cs: Claimed[]): Promise<void> {
    const needed = this.now() + t.timeoutMs + LEASE_SLACK_MS / 2;
    const short = cs.filter((c) => c.leaseUntil < needed);
    if (!short.length || !this.port.extend) return;
    const leaseMs = Math.min(this.o.maxLeaseMs, t.timeoutMs + LEASE_SLACK_MS);
    try {
      await Promise.all(
        short.map(async (c) => {
          c.leaseUntil = await this.port.extend!(c, leaseMs);
        }),
      );
    } catch (e) {
      const why = `its lease could not be kept while it waited for a connection: ${e instanceof Error ? e.message : String(e)}`;
      throw Object.assign(new Error(why), { name: 'LeaseLost' });
    }
  }

  /**
   * POSTs one delivery (a job, or a batch of them) and settles each job by the answer. Never throws.
   * `answered` frees the delivery's slot once the receiver has answered (the acks may still be on
   * their way: they go with the next claim).
   */
  async deliver(t: PushTarget, cs: Claimed[], batched: boolean, answered: () => void): Promise<void> {
    const t0 = this.now();
    const d: Answer = { status: null, ms: 0, batch: cs.length };
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
    let timer: ReturnType<typeof setTimeout> | undefined;
    let connected = false;
    const disconnect = () => {
      if (!connected) return;
      connected = false;
      this.connections.give(1);
    };
    try {
      const tokens = await Promise.all(cs.map((c) => this.port.deliveryToken(c)));
      const body = deliveryBody(cs, tokens, batched, this.o);
      // A job's attempt is in exactly one delivery, so the first job's names its batch uniquely.
      const msgId = `${batched ? 'batch_' : ''}${cs[0]!.id}.${cs[0]!.attempt}`;
      // A connection first: its timeout runs from the send, and its leases are kept past it.
      await this.connections.take(1, abort.signal);
      connected = true;
      await this.keepLeases(t, cs);
      timer = setTimeout(() => abort.abort(new DOMException('push target timed out', 'TimeoutError')), t.timeoutMs);
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
      // Its headers came: the connection is free for the next (a body still coming holds none).
      disconnect();
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
        err.name === 'LeaseLost'
          ? err.message
          : err.name === 'TimeoutError' || err.name === 'AbortError'
            ? `push target did not answer within ${t.timeoutMs} ms`
            : `push target could not be reached: ${err.message}`;
      await nackAll(message);
    } finally {
      disconnect();
      if (timer !== undefined) clearTimeout(timer);
    }
  }

  /** Settles a delivery's jobs by its 2xx answer, read whole: its one job acked with the body, or each of a batch as the body says. */
  private async settleAnswer(
    cs: Claimed[],
    d: Answer,
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
