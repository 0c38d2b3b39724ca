/**
 * HttpDispatch: the dispatch contract over HTTP, against the edge plane (`wrangler dev` locally,
 * or a deployed Worker).
 *
 * @example
 * const d = new HttpDispatch('http://127.0.0.1:8787', { token, namespace: 'default' });
 * const id = await d.submit('gpu', new TextEncoder().encode('{"fn":"train"}'), { id: crypto.randomUUID() });
 * const bytes = await d.result(id, { timeoutMs: 60_000 });
 */
import { checkSubmitOptions } from '../check-options.ts';
import type { State } from '../../src/core/states.ts';
import type { Invocation, JournalFrame, JournalPage } from '../../src/core/types.ts';
import { endedOf, errorFor, LakeshoreError, outcomeResult, TimeoutError } from '../errors.ts';
import { Locator } from './locate.ts';
import { ResultWaits } from './result-waits.ts';
import type * as wire from '../../src/core/wire-types.ts';
import type { DispatchPlane, Ended, ReadOptions, StreamToken, SubmitOptions } from '../types.ts';
import type { Batcher } from '../batcher.ts';
import { batcherFor, enc, invocationOf, outcomeOf, pageOf, queuePath, seg, type Json } from './wire.ts';
import { type SubmitItem, submitParts, submitWire } from './batches.ts';
import { followJournal } from './follow.ts';
import { HttpHolderVerbs } from './holder.ts';
import { Transport, type TransportOptions } from './transport.ts';

/** The client's options: the transport's (transport.ts), and these. */
export interface HttpDispatchOptions extends Partial<TransportOptions> {
  namespace?: string;
  /** Merge concurrent submits and acks into batch requests (default true). */
  coalesce?: boolean;
}

/** The longest single long-poll; longer waits are made of several. */
const SLICE_MS = 50_000;

export class HttpDispatch extends HttpHolderVerbs implements DispatchPlane {
  readonly baseUrl: string;
  readonly namespace: string;
  private readonly timeout: number;
  private readonly open = new Set<AbortController>();
  private readonly submitters = new Map<string, Batcher<SubmitItem, string>>();
  /** Result waits of many jobs, shared by queue (result-waits.ts). */
  private readonly waits = new ResultWaits((queue, ids, signal, cursor) => this.resultsCall(queue, ids, SLICE_MS, signal, cursor));
  /** The queues of awaited jobs this client does not know, looked up together (locate.ts). */
  private readonly locator = new Locator(async (ids) =>
    (await this.getMany(ids)).map((r) => {
      if (r) this.hint(r.id, r.queue);
      return r?.queue ?? null;
    }),
  );

  constructor(baseUrl: string, opts: HttpDispatchOptions = {}) {
    // A URL that is not one is said now, not retried as an outage (Python's HttpDispatch says the same).
    if (!isPlaneUrl(baseUrl)) throw errorFor('bad_request', `the plane's URL must be http(s)://host[:port], not '${String(baseUrl)}'`);
    const base = baseUrl.replace(/\/+$/, '');
    const timeout = opts.timeout ?? 30_000;
    super(new Transport(`${base}/v1/ns/${enc(opts.namespace ?? 'default')}`, { ...opts, timeout }), opts.coalesce ?? true);
    this.baseUrl = base;
    this.namespace = opts.namespace ?? 'default';
    this.timeout = opts.timeout ?? 30_000;
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
    const out = await this.http.call('POST', `/invocations/${seg('id', id)}/cancel${this.q(id)}`);
    return out.cancelled === true;
  }

  async get(id: string): Promise<Invocation | null> {
    try {
      return invocationOf(await this.http.call('GET', `/invocations/${seg('id', id)}`));
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
      const r = await this.http.call('GET', `/invocations/${seg('id', id)}/result${this.q(id, { timeout_ms: String(slice) })}`, undefined, {
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

  /** The names alone (`GET /queue-names`, 1,000 a page): no queue's object is asked and no backlog counted. */
  async listQueues(): Promise<string[]> {
    return this.pages('/queue-names', (j) => j.queues as string[]);
  }

  /** A read-only token for one invocation, and its journal's SSE URL, for a browser (docs/contract.md). */
  async streamToken(id: string, opts: { ttlMs?: number; streams?: number } = {}): Promise<StreamToken> {
    const out = await this.http.call('POST', `/invocations/${seg('id', id)}/stream-token${this.q(id)}`, {
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
    await this.http.call('POST', `/invocations/${seg('id', id)}/retry${this.q(id)}`);
  }

  async delete(id: string): Promise<void> {
    await this.http.call('DELETE', `/invocations/${seg('id', id)}${this.q(id)}`);
  }

  // ------------------------------------------------------------ journal

  /**
   * The journal as it is written, over Server-Sent Events. After a dropped connection it
   * reconnects from the last seq it yielded, so no frame is lost or repeated. Ends after a final
   * frame or once the invocation is terminal.
   */
  journalRead(id: string, opts: ReadOptions = {}): AsyncGenerator<JournalFrame> {
    return followJournal(id, opts, this.open, (cursor, signal) =>
      this.http.fetch(`/invocations/${seg('id', id)}/journal${this.q(id)}`, {
        headers: { accept: 'text/event-stream', 'last-event-id': String(cursor) },
        signal,
      }),
    );
  }

  async journalPage(id: string, opts: { since?: number; limit?: number } = {}): Promise<JournalPage> {
    const p: Record<string, string> = { since: String(opts.since ?? -1) };
    if (opts.limit !== undefined) p.limit = String(opts.limit);
    return pageOf(await this.http.call('GET', `/invocations/${seg('id', id)}/journal${this.q(id, p)}`));
  }

  async journalTrim(id: string, keepLast: number): Promise<number> {
    const out = await this.http.call('POST', `/invocations/${seg('id', id)}/journal/trim${this.q(id)}`, { keep_last: keepLast } satisfies {
      keep_last: number;
    });
    return Number(out.trimmed);
  }

  async close(): Promise<void> {
    for (const ac of this.open) ac.abort();
    this.open.clear();
    this.http.close();
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
