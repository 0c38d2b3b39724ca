/**
 * The worker's verbs over HTTP (HttpDispatch's, split out): claims, acks, nacks, heartbeats and
 * appends, and what they remember: each claimed job's attempt (so a holder's calls are fenced
 * without the caller repeating it) and each job's queue (a routing hint, never trusted for
 * correctness). Concurrent acks and nacks of a queue go out as one batch request.
 */
import { checkClaimOptions, checkNackOptions } from '../check-options.ts';
import { toBase64 } from '../../src/core/bytes.ts';
import { ACKS_WAIT_MS } from '../../src/core/limits.ts';
import { decodeFrame } from '../../src/core/frame.ts';
import type { Claimed, Frame, HeartbeatAnswer } from '../../src/core/types.ts';
import { errorFor } from '../errors.ts';
import type * as wire from '../../src/core/wire-types.ts';
import type { AckRequest, AppendOptions, ClaimOptions, HolderOptions, NackOptions, NackedState } from '../types.ts';
import type { Batcher } from '../batcher.ts';
import { b64, batcherFor, queuePath, seg, settledOf, type Json } from './wire.ts';
import { type AckItem, ackParts, claimWire, type NackItem, nackParts, ridingAcks } from './batches.ts';
import { HttpOperators } from './operators.ts';
import type { Transport } from './transport.ts';
import { randomId } from '../ids.ts';
import { HeldClaims } from '../held-claims.ts';

/** How many recent ids remember their queue, so routes by id skip the plane's lookup. */
const HINTS = 100_000;

export class HttpHolderVerbs extends HttpOperators {
  /** id -> queue, from submits, claims and look-ups (a routing hint, never trusted for correctness). */
  protected readonly queues = new Map<string, string>();
  /** The claims this client made, so a holder's calls are fenced without the caller repeating the attempt. */
  private readonly claims = new HeldClaims();
  /** Merge concurrent submits and acks into batch requests. */
  protected readonly coalesce: boolean;
  private readonly ackers = new Map<string, Batcher<AckItem, Json>>();
  private readonly nackers = new Map<string, Batcher<NackItem, Json>>();

  constructor(http: Transport, coalesce: boolean) {
    super(http);
    this.coalesce = coalesce;
  }

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
      attempt: this.claims.attemptOf(a.id, workerId, a.attempt),
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
    items.forEach((a, i) => {
      if (answers[i] === null) this.claims.done(a.id, workerId, a.attempt);
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
        // A plane from before budget_attempt: the attempt, as the worker counted before.
        budgetAttempt: Number(c.budget_attempt ?? c.attempt),
        leaseUntil: Number(c.lease_until),
        priority: Number(c.priority),
      };
      this.hint(claimed.id, claimed.queue);
      this.claims.held(claimed.id, workerId, claimed.attempt);
      return claimed;
    });
  }

  async release(queue: string, workerId: string, items: { id: string; attempt?: number }[]): Promise<string[]> {
    const handed = items.map((it) => ({ id: it.id, attempt: this.claims.attemptOf(it.id, workerId, it.attempt) }));
    const out = await this.http.call('POST', `${queuePath(queue)}/release`, {
      worker_id: workerId,
      items: handed,
    } satisfies wire.ReleaseWire);
    const back = new Set(out.released as string[]);
    for (const it of handed) if (back.has(it.id)) this.claims.done(it.id, workerId, it.attempt);
    return [...back];
  }

  async ack(id: string, workerId: string, opts: HolderOptions & { result?: Uint8Array | null } = {}): Promise<void> {
    const attempt = this.claims.attemptOf(id, workerId, opts.attempt);
    const queue = this.queues.get(id);
    if (this.coalesce && queue) {
      const b = batcherFor(this.ackers, queue, (items) => this.ackBatch(queue, items));
      await b.add({ id, workerId, attempt, result: opts.result ?? null });
    } else {
      await this.http.call('POST', `/invocations/${seg('id', id)}/ack${this.q(id)}`, {
        worker_id: workerId,
        attempt,
        result: opts.result ? toBase64(opts.result) : null,
      } satisfies wire.AckBodyWire);
    }
    this.claims.done(id, workerId, attempt);
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
      attempt: this.claims.attemptOf(id, workerId, opts.attempt),
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
      out = await this.http.call('POST', `/invocations/${seg('id', id)}/nack${this.q(id)}`, {
        worker_id: workerId,
        attempt: item.attempt,
        error: item.error,
        retry: item.retry,
        delay_ms: item.delayMs,
        max_attempts: item.maxAttempts,
      } satisfies wire.NackWire);
    }
    this.claims.done(id, workerId, item.attempt);
    return out.state as NackedState;
  }

  /** Nacks many invocations of one queue in one request; each is fenced on its own and fails alone. */
  private nackBatch(queue: string, items: NackItem[]) {
    return nackParts(this.http, queue, items);
  }

  async heartbeat(id: string, workerId: string, opts: HolderOptions & { leaseMs?: number } = {}): Promise<HeartbeatAnswer> {
    const out = await this.http.call('POST', `/invocations/${seg('id', id)}/heartbeat${this.q(id)}`, {
      worker_id: workerId,
      attempt: this.claims.attemptOf(id, workerId, opts.attempt),
      lease_ms: opts.leaseMs ?? null,
    } satisfies wire.HeartbeatWire);
    return { leaseUntil: (out.lease_until as number | null) ?? null, cancelled: out.cancelled === true };
  }

  async journalAppend(id: string, seq: number | null, frame: Frame | Uint8Array, opts: AppendOptions = {}): Promise<number> {
    const f = frame instanceof Uint8Array ? decodeFrame(frame) : frame;
    const held = this.claims.get(id);
    const workerId = opts.workerId ?? held?.workerId;
    if (!workerId) throw errorFor('bad_request', `journalAppend(${id}): no workerId given and this client did not claim ${id}`);
    const out = await this.http.call('POST', `/invocations/${seg('id', id)}/journal${this.q(id)}`, {
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

  // ------------------------------------------------------------ plumbing

  protected hint(id: string, queue: string): void {
    if (this.queues.size >= HINTS) this.queues.delete(this.queues.keys().next().value!);
    this.queues.set(id, queue);
  }

  /** `?queue=` when this client knows the invocation's queue, plus any extra params. */
  protected q(id: string, extra: Record<string, string> = {}): string {
    const p = new URLSearchParams(extra);
    const queue = this.queues.get(id);
    if (queue) p.set('queue', queue);
    const s = p.toString();
    return s ? `?${s}` : '';
  }
}
