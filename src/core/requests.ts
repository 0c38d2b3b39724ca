/**
 * Verb requests as callers hand them to the engine (fields still unchecked: they come from HTTP
 * bodies and from local callers alike), and the parsers that turn them into checked inputs or
 * throw a 400/413 naming what was wrong. Each rule has one home, here or in validate.ts.
 */
import { badRequest, LakeshoreError } from './errors.ts';
import { isFrameKind, isTerminalKind } from './frame.ts';
import type { Limits } from './limits.ts';
import { newPushSecret, pushInput, type PushHosts } from './push-target.ts';
import type { AckItem } from './sql/ack.ts';
import type { AppendInput } from './sql/append.ts';
import type { ClaimInput } from './sql/claim.ts';
import type { Holder } from './sql/fence.ts';
import type { SubmitInput } from './sql/submit.ts';
import type { Backoff, InvocationError } from './types.ts';
import * as v from './validate.ts';

export interface SubmitRequest {
  id: unknown;
  envelope: unknown;
  key?: unknown;
  priority?: unknown;
  parent?: unknown;
  /** Not claimable before this many ms from now (or `runAt`, epoch ms; not both). */
  delayMs?: unknown;
  runAt?: unknown;
  /** Fails as Expired if not claimed within this many ms (or by `expiresAt`; not both). */
  ttlMs?: unknown;
  expiresAt?: unknown;
  /** Its own attempt budget (below or above the queue's). */
  maxAttempts?: unknown;
}

export interface ClaimRequest {
  workerId: unknown;
  kind?: unknown;
  temperature?: unknown;
  leaseMs?: unknown;
  /** How long to wait for work when the queue is empty; 0 answers at once. */
  waitMs?: unknown;
  /** Most invocations to claim; default 1. */
  max?: unknown;
  signal?: AbortSignal;
  /** Told when the claim found nothing and parks to wait (once, before its first wait). */
  onPark?: () => void;
}

/** A claim's checked arguments. */
export interface ClaimArgs {
  q: string;
  max: number;
  input: ClaimInput & { temperature: number };
  /** How long it may wait for work, in ms. */
  wait: number;
}

export function claimArgs(queue: unknown, req: ClaimRequest, limits: Limits): ClaimArgs {
  const max = v.nonNegInt('max', req.max, 1, limits.maxBatch);
  if (max < 1) throw badRequest('max must be at least 1');
  return {
    q: v.queue(queue, limits),
    max,
    input: {
      workerId: v.workerId(req.workerId),
      kind: v.claimKind(req.kind),
      temperature: v.temperature(req.temperature),
      leaseMs: v.leaseMs(req.leaseMs, limits),
    },
    wait: v.waitMs('wait_ms', req.waitMs, 0, limits.maxClaimWaitMs),
  };
}

export interface HolderRequest {
  workerId: unknown;
  attempt?: unknown;
  /** The invocation's queue when the caller knows it; it narrows the guard. */
  queue?: string | null;
}

export interface AckRequest extends HolderRequest {
  id: unknown;
  result?: unknown;
}

export interface NackRequest extends HolderRequest {
  error: unknown;
  retry?: unknown;
  /** With retry: wait this long before the next attempt (instead of the queue's backoff). */
  delayMs?: unknown;
  /**
   * The worker's attempt budget (its `retries` + 1): used only when neither the job nor its queue
   * sets one, in place of the plane's default.
   */
  maxAttempts?: unknown;
}

export interface AppendRequest extends HolderRequest {
  seq?: unknown;
  kind: unknown;
  body: unknown;
  meta?: unknown;
  final?: unknown;
}

/** Queue settings to change: a field left out keeps its value, a null clears it (the plane's default applies). */
export interface SettingsRequest {
  leaseMs?: unknown;
  maxAttempts?: unknown;
  maxRunning?: unknown;
  claimsPerSecond?: unknown;
  retryBackoff?: unknown;
  deadLetterQueue?: unknown;
  ttlMs?: unknown;
  retentionMs?: unknown;
  journalRetentionMs?: unknown;
  timeLimitMs?: unknown;
  /** The push target ({url, concurrency, timeoutMs, batchSize, rotateSecret}) or null (workers pull): core/push-target.ts. */
  push?: unknown;
}

/** The stored form of settings to change: column -> value, only for the fields given. */
export type SettingsPatch = Partial<
  Record<
    | 'lease_ms'
    | 'max_attempts'
    | 'max_running'
    | 'claims_per_second'
    | 'backoff'
    | 'dead_letter_queue'
    | 'ttl_ms'
    | 'retention_ms'
    | 'journal_retention_ms'
    | 'time_limit_ms'
    | 'push_url'
    | 'push_concurrency'
    | 'push_timeout_ms'
    | 'push_batch_size'
    /** A new secret: stored if the queue has none yet or `push_rotate` is 1 (configure.ts). */
    | 'push_secret'
    | 'push_rotate',
    number | string | null
  >
>;

/** Most backoff steps stored: past them the last one repeats (it has reached max_ms long before). */
const BACKOFF_STEPS = 64;

export function backoffInput(b: unknown, limits: Limits): string | null {
  if (b === null) return null;
  if (typeof b !== 'object' || Array.isArray(b))
    throw badRequest('retry_backoff must be an object {initial_ms, factor, max_ms, jitter} or null');
  const o = b as Record<string, unknown>;
  const initialMs = v.durationMs('retry_backoff.initial_ms', o.initialMs, limits) ?? 0;
  const factor = v.finite('retry_backoff.factor', o.factor, 2);
  if (factor < 1 || factor > 100) throw badRequest('retry_backoff.factor must be between 1 and 100');
  const maxMs = v.durationMs('retry_backoff.max_ms', o.maxMs, limits) ?? Math.max(initialMs, 3_600_000);
  if (maxMs < initialMs) throw badRequest('retry_backoff.max_ms must not be below initial_ms');
  const jitter = v.finite('retry_backoff.jitter', o.jitter, 0);
  if (jitter < 0 || jitter > 1) throw badRequest('retry_backoff.jitter must be between 0 and 1');
  return storedBackoff({ initialMs, factor, maxMs, jitter });
}

/**
 * A backoff as the plane stores it: its settings, and the delay of each attempt worked out once
 * here, so SQL looks it up (sql/attempts.ts: no math functions needed).
 */
export function storedBackoff(b: Backoff): string {
  const { initialMs, factor, maxMs, jitter } = b;
  const delays: number[] = [];
  for (let d = initialMs; delays.length < BACKOFF_STEPS; d *= factor) {
    delays.push(Math.min(maxMs, Math.round(d)));
    if (d >= maxMs) break;
  }
  return JSON.stringify({ initial_ms: initialMs, factor, max_ms: maxMs, jitter, delays });
}

/** The settings a request changes, checked. */
export function settingsInput(
  req: SettingsRequest,
  limits: Limits,
  queue: string,
  hosts: PushHosts = 'local',
  services: readonly string[] = [],
): SettingsPatch {
  const p: SettingsPatch = {};
  const given = (k: keyof SettingsRequest) => req[k] !== undefined;
  if (given('leaseMs')) p.lease_ms = v.leaseMs(req.leaseMs, limits);
  if (given('maxAttempts')) p.max_attempts = v.attempts('max_attempts', req.maxAttempts);
  if (given('maxRunning')) {
    p.max_running = req.maxRunning === null ? null : v.nonNegInt('max_running', req.maxRunning, 0, 1_000_000);
    if (p.max_running === 0) throw badRequest('max_running must be at least 1 (pause the queue to stop claims)');
  }
  if (given('claimsPerSecond') && req.claimsPerSecond !== null) {
    const r = v.finite('claims_per_second', req.claimsPerSecond, 0);
    if (r <= 0 || r > 1_000_000) throw badRequest('claims_per_second must be above 0 and at most 1,000,000');
    p.claims_per_second = r;
  } else if (given('claimsPerSecond')) p.claims_per_second = null;
  if (given('retryBackoff')) p.backoff = backoffInput(req.retryBackoff, limits);
  if (given('deadLetterQueue')) {
    p.dead_letter_queue = req.deadLetterQueue === null ? null : v.queue(req.deadLetterQueue, limits);
    if (p.dead_letter_queue === queue) throw badRequest('dead_letter_queue must be another queue');
  }
  if (given('ttlMs')) p.ttl_ms = v.durationMs('ttl_ms', req.ttlMs, limits, 1);
  if (given('retentionMs')) p.retention_ms = v.durationMs('retention_ms', req.retentionMs, limits, 1);
  if (given('journalRetentionMs')) p.journal_retention_ms = v.durationMs('journal_retention_ms', req.journalRetentionMs, limits, 0);
  if (given('timeLimitMs')) p.time_limit_ms = v.durationMs('time_limit_ms', req.timeLimitMs, limits, 1);
  if (given('push')) {
    if (req.push === null) p.push_url = p.push_concurrency = p.push_timeout_ms = p.push_batch_size = null;
    else {
      const t = pushInput(req.push, hosts, services);
      p.push_url = t.url;
      p.push_concurrency = t.concurrency;
      p.push_timeout_ms = t.timeoutMs;
      p.push_batch_size = t.batchSize;
      p.push_secret = newPushSecret();
      p.push_rotate = t.rotate ? 1 : 0;
    }
  }
  return p;
}

/** A submit, checked; `now` turns a delay or TTL into the moment it names. */
export function submitInput(req: SubmitRequest, limits: Limits, now: number): SubmitInput {
  if (req.delayMs != null && req.runAt != null) throw badRequest('give delay_ms or run_at, not both');
  if (req.ttlMs != null && req.expiresAt != null) throw badRequest('give ttl_ms or expires_at, not both');
  const delay = v.durationMs('delay_ms', req.delayMs, limits);
  const runAt = delay !== null ? now + delay : v.moment('run_at', req.runAt, now, limits);
  const ttl = v.durationMs('ttl_ms', req.ttlMs, limits, 1);
  return {
    id: v.id(req.id, limits),
    envelope: v.bytes('envelope', req.envelope, limits.envelopeBytes),
    key: v.optionalText('key', req.key, limits.keyLength),
    priority: v.finite('priority', req.priority, 0),
    parent: v.optionalText('parent', req.parent, limits.idLength),
    runAt: runAt !== null && runAt > now ? runAt : null,
    expiresAt: ttl !== null ? now + ttl : v.moment('expires_at', req.expiresAt, now, limits),
    maxAttempts: v.attempts('max_attempts', req.maxAttempts),
  };
}

export const holder = (req: HolderRequest): Holder => ({ workerId: v.workerId(req.workerId), attempt: v.attempt(req.attempt) });

export const ackInput = (req: AckRequest, limits: Limits): AckItem => ({
  id: v.id(req.id, limits),
  queue: req.queue ?? null,
  holder: holder(req),
  result: req.result === undefined || req.result === null ? null : v.bytes('result', req.result, limits.resultBytes),
});

/** A nack's error: a string, or an object with a string `message`, within the result size limit. */
export function invocationError(e: unknown, limits: Limits): InvocationError {
  if (typeof e === 'string') return { message: e };
  if (e && typeof e === 'object' && !Array.isArray(e) && typeof (e as InvocationError).message === 'string') {
    const s = JSON.stringify(v.jsonValue('error', e, limits.jsonDepth));
    if (s.length > limits.resultBytes)
      throw new LakeshoreError('payload_too_large', `error is ${s.length} bytes; the limit is ${limits.resultBytes}`);
    return e as InvocationError;
  }
  throw badRequest('error must be a string or an object with a string message');
}

export function nackInput(
  req: NackRequest,
  limits: Limits,
): { holder: Holder; error: InvocationError; retry: boolean; delayMs: number | null; maxAttempts: number | null } {
  if (req.retry !== undefined && req.retry !== null && typeof req.retry !== 'boolean') throw badRequest('retry must be a boolean');
  return {
    holder: holder(req),
    error: invocationError(req.error, limits),
    retry: typeof req.retry === 'boolean' ? req.retry : true,
    delayMs: v.durationMs('delay_ms', req.delayMs, limits),
    maxAttempts: v.attempts('max_attempts', req.maxAttempts),
  };
}

/** A journal cursor (`since`, or an SSE `Last-Event-ID`): the last seq seen, -1 for the start. */
export function journalCursor(s: unknown): number {
  if (s === undefined || s === null) return -1;
  if (typeof s !== 'number' || !Number.isInteger(s) || s < -1) throw badRequest('since must be an integer >= -1');
  return s;
}

export const pageLimit = (l: unknown): number => v.intInRange('limit', l, 1000, 1, 10_000);

/** An appended frame: kind, seq (null: the next), body and meta within their limits, final. */
export function frameInput(req: AppendRequest, limits: Limits): AppendInput {
  if (!isFrameKind(req.kind)) {
    throw badRequest(`unknown frame kind ${JSON.stringify(req.kind)}: expected 0 (VALUE), 1 (CHUNK), 2 (BEGIN), 3 (END) or 4 (ERROR)`);
  }
  const seq = req.seq === undefined || req.seq === null ? null : v.nonNegInt('seq', req.seq, 0);
  if (seq !== null && seq >= limits.framesPerInvocation) {
    throw new LakeshoreError('payload_too_large', `seq ${seq} is past the journal limit of ${limits.framesPerInvocation} frames`);
  }
  const body = v.bytes('frame body', req.body, limits.frameBytes);
  const meta = req.meta === undefined || req.meta === null ? null : req.meta;
  if (meta !== null && (typeof meta !== 'object' || Array.isArray(meta))) throw badRequest('meta must be an object or null');
  v.jsonValue('meta', meta, limits.jsonDepth);
  if (req.final !== undefined && req.final !== null && typeof req.final !== 'boolean') throw badRequest('final must be a boolean');
  const final = typeof req.final === 'boolean' ? req.final : isTerminalKind(req.kind);
  return { seq, kind: req.kind, body, meta: meta as Record<string, unknown> | null, final };
}
