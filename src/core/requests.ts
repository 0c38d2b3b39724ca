/**
 * Verb requests as callers hand them to the engine (fields still unchecked: they come from HTTP
 * bodies and from local callers alike), and the parsers that turn them into checked inputs or
 * throw a 400/413 naming what was wrong. Each rule has one home, here or in validate.ts.
 */
import { badRequest, LakeshoreError } from './errors.ts';
import { isFrameKind, isTerminalKind } from './frame.ts';
import type { Limits } from './limits.ts';
import type { AckItem } from './sql/ack.ts';
import type { AppendInput } from './sql/append.ts';
import type { ClaimInput } from './sql/claim.ts';
import type { Holder } from './sql/fence.ts';
import type { SubmitInput } from './sql/submit.ts';
import type { InvocationError } from './types.ts';
import * as v from './validate.ts';

export interface SubmitRequest {
  id: unknown;
  envelope: unknown;
  key?: unknown;
  priority?: unknown;
  parent?: unknown;
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
    input: { workerId: v.workerId(req.workerId), kind: v.claimKind(req.kind), temperature: v.temperature(req.temperature), leaseMs: v.leaseMs(req.leaseMs, limits) },
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
}

export interface AppendRequest extends HolderRequest {
  seq?: unknown;
  kind: unknown;
  body: unknown;
  meta?: unknown;
  final?: unknown;
}

export interface SettingsRequest {
  leaseMs?: unknown;
  maxAttempts?: unknown;
}

/** A queue's settings; null leaves the plane default in force. */
export function settingsInput(req: SettingsRequest, limits: Limits): { leaseMs: number | null; maxAttempts: number | null } {
  const maxAttempts = req.maxAttempts === undefined || req.maxAttempts === null ? null : v.nonNegInt('max_attempts', req.maxAttempts, 0, 1000);
  if (maxAttempts !== null && maxAttempts < 1) throw badRequest('max_attempts must be at least 1');
  return { leaseMs: v.leaseMs(req.leaseMs, limits), maxAttempts };
}

export function submitInput(req: SubmitRequest, limits: Limits): SubmitInput {
  return {
    id: v.id(req.id, limits),
    envelope: v.bytes('envelope', req.envelope, limits.envelopeBytes),
    key: v.optionalText('key', req.key, limits.keyLength),
    priority: v.finite('priority', req.priority, 0),
    parent: v.optionalText('parent', req.parent, limits.idLength),
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
    if (s.length > limits.resultBytes) throw new LakeshoreError('payload_too_large', `error is ${s.length} bytes; the limit is ${limits.resultBytes}`);
    return e as InvocationError;
  }
  throw badRequest('error must be a string or an object with a string message');
}

export function nackInput(req: NackRequest, limits: Limits): { holder: Holder; error: InvocationError; retry: boolean } {
  if (req.retry !== undefined && req.retry !== null && typeof req.retry !== 'boolean') throw badRequest('retry must be a boolean');
  return { holder: holder(req), error: invocationError(req.error, limits), retry: typeof req.retry === 'boolean' ? req.retry : true };
}

/** A journal cursor (`since`, or an SSE `Last-Event-ID`): the last seq seen, -1 for the start. */
export function journalCursor(s: unknown): number {
  if (s === undefined || s === null) return -1;
  if (typeof s !== 'number' || !Number.isInteger(s) || s < -1) throw badRequest('since must be an integer >= -1');
  return s;
}

export const pageLimit = (l: unknown): number => Math.max(1, v.nonNegInt('limit', l, 1000, 10_000));

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
