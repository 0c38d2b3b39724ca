/**
 * HttpDispatch: the dispatch contract over HTTP, against the edge plane (`wrangler dev` locally,
 * or a deployed Worker).
 *
 * @example
 * const d = new HttpDispatch('http://127.0.0.1:8787', { token, namespace: 'default' });
 * const id = await d.submit('gpu', new TextEncoder().encode('{"fn":"train"}'), { id: crypto.randomUUID() });
 * const bytes = await d.result(id, { timeoutMs: 60_000 });
 */
import { checkClaimOptions, checkNackOptions, checkSubmitOptions } from '../check-options.ts';
import { toBase64 } from '../../src/core/bytes.ts';
import { ACKS_WAIT_MS } from '../../src/core/limits.ts';
import { decodeFrame } from '../../src/core/frame.ts';
import type { State } from '../../src/core/states.ts';
import type { Claimed, Frame, HeartbeatAnswer, Invocation, JournalFrame, JournalPage } from '../../src/core/types.ts';
import { endedOf, errorFor, LakeshoreError, outcomeResult, TimeoutError } from '../errors.ts';
import { Locator } from './locate.ts';
import { ResultWaits } from './result-waits.ts';
import type * as wire from '../../src/core/wire-types.ts';
import type {
  AckRequest,
  AppendOptions,
  ClaimOptions,
  DispatchPlane,
  Ended,
  HolderOptions,
  NackOptions,
  NackedState,
  ReadOptions,
  StreamToken,
  SubmitOptions,
} from '../types.ts';
import type { Batcher } from '../batcher.ts';
import { b64, batcherFor, enc, invocationOf, outcomeOf, pageOf, queuePath, settledOf, type Json } from './wire.ts';
import {
  type AckItem,
  ackParts,
  claimWire,
  type NackItem,
  nackParts,
  ridingAcks,
  type SubmitItem,
  submitParts,
  submitWire,
} from './batches.ts';
import { followJournal } from './follow.ts';
import { HttpOperators } from './operators.ts';
import { Transport, type TransportOptions } from './transport.ts';
import { randomId } from '../ids.ts';

/** The client's options: the transport's (transport.ts), and these. */
export interface HttpDispatchOptions extends Partial<TransportOptions> {
  namespace?: string;
  /** Merge concurrent submits and acks into batch requests (default true). */
  coalesce?: boolean;
}

/** The longest single long-poll; longer waits are made of several. */
const SLICE_MS = 50_000;
/** How many recent ids remember their queue, so routes by id skip the plane's lookup. */
const HINTS = 100_000;

export class HttpDispatch extends HttpOperators implements DispatchPlane {
  readonly baseUrl: string;
  readonly namespace: string;
  private readonly timeout: number;
  /** id -> queue, from submits and claims (a routing hint, never trusted for correctness). */
  private readonly queues = new Map<string, string>();
  /** id -> the claim this client made, so appends can be fenced without the caller repeating it. */
  private readonly claims = new Map<string, { workerId: string; attempt: number }>();
  private readonly open = new Set<AbortController>();
  private readonly coalesce: boolean;
  private readonly submitters = new Map<string, Batcher<SubmitItem, string>>();
  private readonly ackers = new Map<string, Batcher<AckItem, Json>>();
  private readonly nackers = new Map<string, Batcher<NackItem, Json>>();
  /** Result waits of many jobs, shared by queue (result-waits.ts). */
  private readonly locator = new Locator(async (ids) =>
    (await this.getMany(ids)).map((r) => {
      if (r) this.hint(r.id, r.queue);
      return r?.queue ?? null;
    }),
  );
  private readonly waits = new ResultWaits((queue, ids, signal, cursor) => this.resultsCall(queue, ids, SLICE_MS, signal, cursor));

  constructor(baseUrl: string, opts: HttpDispatchOptions = {}) {
    // A URL that is not one is said now, not retried as an outage (Python's HttpDispatch says the same).
    if (!isPlaneUrl(baseUrl)) throw errorFor('bad_request', `the plane's URL must be http(s)://host[:port], not '${String(baseUrl)}'`);
    const base = baseUrl.replace(/\/+$/, '');
    const timeout = opts.timeout ?? 30_000;
    super(new Transport(`${base}/v1/ns/${enc(opts.namespace ?? 'default')}`, { ...opts, timeout }));
    this.baseUrl = base;
    this.namespace = opts.namespace ?? 'default';
    this.timeout = opts.timeout ?? 30_000;
    this.coalesce = opts.coalesce ?? true;
  }

  // ------------------------------------------------------------ producers

  async submit(queue: string, envelope: Uint8Array, opts: SubmitOptions): Promise<string> {
    // As the plane and the local one say it, before a batch is made of it (a batch cannot size a missing id).
    if (typeof opts?.id !== 'string') throw errorFor('bad_request', 'id must be a string');
    checkSubmitOptions(opts);
    if (this.coalesce) {
      if (opts.priority !== undefined && !Number.isFinite(opts.priority)) throw errorFor('bad_request', 'priority must be a finite number');
      const b = batcherFor(this.submitters, queue, (items) => this.submitBatch(queue, items));
      return b.add({ envelope, opts });
    }
    const out = await this.http.call('POST', `${queuePath(queue)}/invocations`, submitWire(envelope, opts));
    const id = String(out.id);
    this.hint(id, queue);
    return id;
  }

  /** Coalesced submits, each checked by submit() already. */
  private async submitBatch(queue: string, items: SubmitItem[]) {
    const out = await this.sendMany(queue, items);
    return out.map((r) => ('id' in r ? { ok: true as const, value: r.id } : { ok: false as const, error: r.error }));
  }

  /** Submits many; a batch larger than one request allows goes in parts (see inParts). */
  async submitMany(queue: string, items: SubmitItem[]): Promise<({ id: string } | { error: Error })[]> {
    for (const it of items) if (typeof it?.opts === 'object' && it.opts !== null) checkSubmitOptions(it.opts);
    return this.sendMany(queue, items);
  }

  private async sendMany(queue: string, items: SubmitItem[]): Promise<({ id: string } | { error: Error })[]> {
    const out = await submitParts(this.http, queue, items);
    for (const r of out) if ('id' in r) this.hint(r.id, queue);
    return out;
  }

  async cancel(id: string): Promise<boolean> {
    const out = await this.http.call('POST', `/invocations/${enc(id)}/cancel${this.q(id)}`);
    return out.cancelled === true;
  }

  async get(id: string): Promise<Invocation | null> {
    try {
      return invocationOf(await this.http.call('GET', `/invocations/${enc(id)}`));
    } catch (e) {
      if (e instanceof LakeshoreError && e.code === 'not_found') return null;
      throw e;
    }
  }

  async result(id: string, opts: { timeoutMs?: number; signal?: AbortSignal } = {}): Promise<Uint8Array | null> {
    if (opts.timeoutMs !== undefined && !(opts.timeoutMs >= 0)) throw errorFor('bad_request', 'timeout must not be negative');
    const timeoutMs = opts.timeoutMs ?? this.timeout;
    const deadline = Date.now() + timeoutMs;
    // A job whose queue this client knows, or learns with the others awaited now (locate.ts),
    // waits with the others it awaits there (result-waits.ts).
    const shared = this.coalesce && timeoutMs > 0;
    const queue = shared ? (this.queues.get(id) ?? (await this.locator.queueOf(id))) : null;
    if (queue) {
      const item = await this.waits.wait(queue, id, deadline, opts.signal);
      if (item) return outcomeResult(id, outcomeOf(item)!);
    }
    for (;;) {
      const left = Math.max(0, deadline - Date.now());
      const slice = Math.min(left, SLICE_MS);
      const r = await this.http.call('GET', `/invocations/${enc(id)}/result${this.q(id, { timeout_ms: String(slice) })}`, undefined, {
        waitMs: slice,
        signal: opts.signal,
      });
      if (r.state === 'succeeded' || r.state === 'failed' || r.state === 'cancelled') return outcomeResult(id, outcomeOf(r)!);
      if (Date.now() >= deadline) throw new TimeoutError(`invocation ${id} is still ${String(r.state)} after ${timeoutMs} ms`);
    }
  }

  async results(queue: string, ids: string[], opts: { timeoutMs?: number; signal?: AbortSignal } = {}): Promise<Ended[]> {
    const { items } = await this.resultsCall(queue, ids, opts.timeoutMs ?? this.timeout, opts.signal, null);
    return items.map((r) =>
      r.state === undefined
        ? { id: r.id, ok: false, error: errorFor((r.error as Json).code as string, String((r.error as Json).message)) }
        : endedOf(r.id, outcomeOf(r)!),
    );
  }

  /** One `results` request, as the plane answers it: its items, and its cursor (the shared waits hand it back). */
  private async resultsCall(queue: string, ids: string[], timeoutMs: number, signal: AbortSignal | undefined, after: string | null) {
    const body = { ids, timeout_ms: timeoutMs, after } satisfies wire.ResultsWire;
    const out = await this.http.call('POST', `${queuePath(queue)}/results`, body, { waitMs: timeoutMs, signal });
    return { items: out.results as (Json & { id: string })[], cursor: typeof out.cursor === 'string' ? out.cursor : null };
  }

  async count(queue: string, state: State = 'queued'): Promise<number> {
    const out = await this.http.call('GET', `${queuePath(queue)}/count?state=${enc(state)}`);
    return Number(out.count);
  }

  async listQueues(): Promise<string[]> {
    return (await this.overview()).map((q) => q.queue);
  }

  /** A read-only token for one invocation, and its journal's SSE URL, for a browser (docs/contract.md). */
  async streamToken(id: string, opts: { ttlMs?: number; streams?: number } = {}): Promise<StreamToken> {
    const out = await this.http.call('POST', `/invocations/${enc(id)}/stream-token${this.q(id)}`, {
      ttl_ms: opts.ttlMs ?? null,
      streams: opts.streams ?? null,
    } satisfies wire.StreamTokenWire);
    return {
      token: String(out.token),
      url: String(out.url),
      expiresAt: Number(out.expires_at),
      id: String(out.id),
      queue: String(out.queue),
      streams: Number(out.streams),
    };
  }

  async retry(id: string): Promise<void> {
    await this.http.call('POST', `/invocations/${enc(id)}/retry${this.q(id)}`);
  }

  async delete(id: string): Promise<void> {
    await this.http.call('DELETE', `/invocations/${enc(id)}${this.q(id)}`);
  }

  // ------------------------------------------------------------ workers

  async claim(queue: string, workerId: string, opts: ClaimOptions = {}): Promise<Claimed | null> {
    const [c] = await this.claimMany(queue, workerId, 1, opts);
    return c ?? null;
  }

  /**
   * A claim with a signal names itself (claim_id): aborted before its answer is in, it calls the
   * claim off on the plane too (POST .../claim/cancel), so a parked claim takes no job and one
   * answered meanwhile gives its jobs back, also where no disconnect reaches the plane (a proxy).
   */
  async claimMany(queue: string, workerId: string, max: number, opts: ClaimOptions = {}): Promise<Claimed[]> {
    checkClaimOptions(opts);
    const claimId = opts.signal ? randomId() : undefined;
    const body = { ...claimWire(workerId, max, opts), claim_id: claimId } satisfies wire.ClaimWire;
    const out = await this.http
      .call('POST', `${queuePath(queue)}/claim`, body, { waitMs: opts.waitMs ?? 0, signal: opts.signal })
      .catch(async (e: unknown) => {
        if (!opts.signal?.aborted) throw e;
        const cancel = { worker_id: workerId, claim_id: claimId! } satisfies wire.ClaimCancelWire;
        await this.http.call('POST', `${queuePath(queue)}/claim/cancel`, cancel).catch(() => {});
        return { claimed: [] };
      });
    return this.claimed(workerId, out.claimed as Json[]);
  }

  /** One request; its acks' answers are never lost to an abort, so it takes no signal. */
  async ackAndClaim(
    queue: string,
    workerId: string,
    acks: AckRequest[],
    max: number,
    opts: ClaimOptions = {},
  ): Promise<{ acks: (Error | null)[]; claimed: Claimed[] }> {
    checkClaimOptions(opts);
    const items = acks.map((a) => ({
      id: a.id,
      attempt: this.attemptOf(a.id, workerId, a.attempt),
      result: a.result ? toBase64(a.result) : null,
    }));
    // The acks that fit one request ride the claim; any beyond go first, as batch acks in parts.
    const fit = ridingAcks(items);
    const before =
      fit < items.length
        ? await this.ackBatch(
            queue,
            acks.slice(fit).map((a, i) => ({ id: a.id, workerId, attempt: items[fit + i]!.attempt, result: a.result ?? null })),
          )
        : [];
    const out = await this.http.call(
      'POST',
      `${queuePath(queue)}/claim`,
      { ...claimWire(workerId, max, opts), acks: items.slice(0, fit) } satisfies wire.ClaimWire,
      { waitMs: Math.min(opts.waitMs ?? 0, ACKS_WAIT_MS) },
    );
    const answers = [...settledOf(out.acks as Json[]), ...before].map((r) => (r.ok ? null : r.error));
    acks.forEach((a, i) => {
      if (answers[i] === null) this.claims.delete(a.id);
    });
    return { acks: answers, claimed: this.claimed(workerId, out.claimed as Json[]) };
  }

  private claimed(workerId: string, rows: Json[]): Claimed[] {
    return rows.map((c) => {
      const claimed: Claimed = {
        id: String(c.id),
        queue: String(c.queue),
        envelope: b64(c.envelope),
        attempt: Number(c.attempt),
        leaseUntil: Number(c.lease_until),
        priority: Number(c.priority),
      };
      this.hint(claimed.id, claimed.queue);
      this.claims.set(claimed.id, { workerId, attempt: claimed.attempt });
      return claimed;
    });
  }

  async ack(id: string, workerId: string, opts: HolderOptions & { result?: Uint8Array | null } = {}): Promise<void> {
    const attempt = this.attemptOf(id, workerId, opts.attempt);
    const queue = this.queues.get(id);
    if (this.coalesce && queue) {
      const b = batcherFor(this.ackers, queue, (items) => this.ackBatch(queue, items));
      await b.add({ id, workerId, attempt, result: opts.result ?? null });
    } else {
      await this.http.call('POST', `/invocations/${enc(id)}/ack${this.q(id)}`, {
        worker_id: workerId,
        attempt,
        result: opts.result ? toBase64(opts.result) : null,
      } satisfies wire.AckBodyWire);
    }
    this.claims.delete(id);
  }

  /** Acks many invocations of one queue in one request; each is fenced on its own and fails alone. */
  private ackBatch(queue: string, items: AckItem[]) {
    return ackParts(this.http, queue, items);
  }

  async nack(id: string, workerId: string, opts: NackOptions): Promise<NackedState> {
    checkNackOptions(opts);
    const item: NackItem = {
      id,
      workerId,
      attempt: this.attemptOf(id, workerId, opts.attempt),
      error: opts.error,
      retry: opts.retry ?? true,
      delayMs: opts.delayMs ?? null,
      maxAttempts: opts.maxAttempts ?? null,
    };
    const queue = this.queues.get(id);
    let out: Json;
    if (this.coalesce && queue) {
      const b = batcherFor(this.nackers, queue, (items) => this.nackBatch(queue, items));
      out = await b.add(item);
    } else {
      out = await this.http.call('POST', `/invocations/${enc(id)}/nack${this.q(id)}`, {
        worker_id: workerId,
        attempt: item.attempt,
        error: item.error,
        retry: item.retry,
        delay_ms: item.delayMs,
        max_attempts: item.maxAttempts,
      } satisfies wire.NackWire);
    }
    this.claims.delete(id);
    return out.state as NackedState;
  }

  /** Nacks many invocations of one queue in one request; each is fenced on its own and fails alone. */
  private nackBatch(queue: string, items: NackItem[]) {
    return nackParts(this.http, queue, items);
  }

  async heartbeat(id: string, workerId: string, opts: HolderOptions & { leaseMs?: number } = {}): Promise<HeartbeatAnswer> {
    const out = await this.http.call('POST', `/invocations/${enc(id)}/heartbeat${this.q(id)}`, {
      worker_id: workerId,
      attempt: this.attemptOf(id, workerId, opts.attempt),
      lease_ms: opts.leaseMs ?? null,
    } satisfies wire.HeartbeatWire);
    return { leaseUntil: (out.lease_until as number | null) ?? null, cancelled: out.cancelled === true };
  }

  // ------------------------------------------------------------ journal

  async journalAppend(id: string, seq: number | null, frame: Frame | Uint8Array, opts: AppendOptions = {}): Promise<number> {
    const f = frame instanceof Uint8Array ? decodeFrame(frame) : frame;
    const held = this.claims.get(id);
    const workerId = opts.workerId ?? held?.workerId;
    if (!workerId) throw errorFor('bad_request', `journalAppend(${id}): no workerId given and this client did not claim ${id}`);
    const out = await this.http.call('POST', `/invocations/${enc(id)}/journal${this.q(id)}`, {
      worker_id: workerId,
      attempt: opts.attempt ?? (held?.workerId === workerId ? held.attempt : null),
      seq,
      kind: f.kind,
      body: toBase64(f.body),
      meta: f.meta ?? null,
      final: opts.final ?? null,
    } satisfies wire.AppendWire);
    return Number(out.seq);
  }

  /**
   * The journal as it is written, over Server-Sent Events. After a dropped connection it
   * reconnects from the last seq it yielded, so no frame is lost or repeated. Ends after a final
   * frame or once the invocation is terminal.
   */
  journalRead(id: string, opts: ReadOptions = {}): AsyncGenerator<JournalFrame> {
    return followJournal(id, opts, this.open, (cursor, signal) =>
      this.http.fetch(`/invocations/${enc(id)}/journal${this.q(id)}`, {
        headers: { accept: 'text/event-stream', 'last-event-id': String(cursor) },
        signal,
      }),
    );
  }

  async journalPage(id: string, opts: { since?: number; limit?: number } = {}): Promise<JournalPage> {
    const p: Record<string, string> = { since: String(opts.since ?? -1) };
    if (opts.limit !== undefined) p.limit = String(opts.limit);
    return pageOf(await this.http.call('GET', `/invocations/${enc(id)}/journal${this.q(id, p)}`));
  }

  async journalTrim(id: string, keepLast: number): Promise<number> {
    const out = await this.http.call('POST', `/invocations/${enc(id)}/journal/trim${this.q(id)}`, { keep_last: keepLast } satisfies {
      keep_last: number;
    });
    return Number(out.trimmed);
  }

  async close(): Promise<void> {
    for (const ac of this.open) ac.abort();
    this.open.clear();
    this.http.close();
  }

  // ------------------------------------------------------------ plumbing

  private attemptOf(id: string, workerId: string, attempt: number | undefined): number | null {
    if (attempt !== undefined) return attempt;
    const held = this.claims.get(id);
    return held && held.workerId === workerId ? held.attempt : null;
  }

  private hint(id: string, queue: string): void {
    if (this.queues.size >= HINTS) this.queues.delete(this.queues.keys().next().value!);
    this.queues.set(id, queue);
  }

  /** `?queue=` when this client knows the invocation's queue, plus any extra params. */
  private q(id: string, extra: Record<string, string> = {}): string {
    const p = new URLSearchParams(extra);
    const queue = this.queues.get(id);
    if (queue) p.set('queue', queue);
    const s = p.toString();
    return s ? `?${s}` : '';
  }
}

function isPlaneUrl(u: unknown): u is string {
  if (typeof u !== 'string') return false;
  try {
    const url = new URL(u);
    return (url.protocol === 'http:' || url.protocol === 'https:') && url.hostname !== '';
  } catch {
    return false;
  }
}
