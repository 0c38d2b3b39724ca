/**
 * The errors a client raises, one class per contract error code, the same on every plane.
 * Catch by class (`instanceof FencingConflictError`) or by `code`; never by message.
 */
import { LakeshoreError, type ErrorCode } from '../src/core/errors.ts';
import type { InvocationError, Outcome } from '../src/core/types.ts';

export { LakeshoreError };

export class BadRequestError extends LakeshoreError {
  constructor(message: string) {
    super('bad_request', message);
    this.name = 'BadRequestError';
  }
}
export class PayloadTooLargeError extends LakeshoreError {
  constructor(message: string) {
    super('payload_too_large', message);
    this.name = 'PayloadTooLargeError';
  }
}
export class UnauthorizedError extends LakeshoreError {
  constructor(message: string) {
    super('unauthorized', message);
    this.name = 'UnauthorizedError';
  }
}
export class ForbiddenError extends LakeshoreError {
  constructor(message: string) {
    super('forbidden', message);
    this.name = 'ForbiddenError';
  }
}
export class NotFoundError extends LakeshoreError {
  constructor(message: string) {
    super('not_found', message);
    this.name = 'NotFoundError';
  }
}
/** The caller no longer holds the invocation: its lease was lost and the job re-dispatched, or it ended. */
export class FencingConflictError extends LakeshoreError {
  constructor(message: string) {
    super('conflict', message);
    this.name = 'FencingConflictError';
  }
}
/** Over a limit of the token (requests per second, open streams); `retryAfterMs` says when to try again. */
export class RateLimitedError extends LakeshoreError {
  constructor(message: string, retryAfterMs: number | null = null) {
    super('rate_limited', message, { retryAfterMs: retryAfterMs ?? undefined });
    this.name = 'RateLimitedError';
  }
}
/**
 * The namespace's database (its shard) is past its storage high-water mark: submits are refused
 * until retention, a move or a new shard makes room; claims, acks and reads go on. Not retried.
 */
export class StorageFullError extends LakeshoreError {
  constructor(message: string) {
    super('storage_full', message);
    this.name = 'StorageFullError';
  }
}
/** The plane could not be reached (its connection refused or cut) for as long as the client retried. */
export class UnavailableError extends LakeshoreError {
  constructor(message: string, cause?: unknown) {
    super('unavailable', message, { cause });
    this.name = 'UnavailableError';
  }
}
/** A wait ran out: `result` before the invocation ended, or a journal read before its stream did. */
export class TimeoutError extends LakeshoreError {
  constructor(message: string) {
    super('timeout', message);
    this.name = 'TimeoutError';
  }
}
/** `result` of an invocation that failed: carries the invocation's error. */
export class InvocationFailedError extends Error {
  readonly id: string;
  readonly error: InvocationError;
  constructor(id: string, error: InvocationError) {
    super(`invocation ${id} failed: ${error.message}`);
    this.name = 'InvocationFailedError';
    this.id = id;
    this.error = error;
  }
}
/**
 * A job's error as a person reads it (the CLI's `get`, the dashboard): `Type: message`, and the
 * stack, the last attempt's where a spent budget wraps it (AttemptsExhausted's `last`); null when none.
 */
export function errorShown(e: { type?: unknown; message?: unknown; stack?: unknown; last?: unknown }): {
  head: string;
  stack: string | null;
} {
  const last = e.last && typeof e.last === 'object' ? (e.last as { stack?: unknown }) : null;
  const stack = last ? last.stack : e.stack;
  const head = `${typeof e.type === 'string' && e.type ? e.type : 'Error'}: ${String(e.message ?? '')}`;
  // A stack names its error too, a Node one on its first line, a Python traceback on its last
  // (its type with its module: lakeshore.resolve.Unrunnable): not twice.
  const lines = typeof stack === 'string' ? stack.trimEnd().split('\n') : [];
  const names = (l: string | undefined) => l !== undefined && (l.trim() === head || l.trim().endsWith(`.${head}`));
  if (names(lines[0])) lines.shift();
  if (names(lines.at(-1))) lines.pop();
  return { head, stack: lines.join('\n').trim() ? lines.join('\n') : null };
}

/** `result` of an invocation that was cancelled. */
export class InvocationCancelledError extends Error {
  readonly id: string;
  constructor(id: string) {
    super(`invocation ${id} was cancelled`);
    this.name = 'InvocationCancelledError';
    this.id = id;
  }
}

/** The client class for a contract error code. */
export function errorFor(code: ErrorCode | string, message: string, extra?: { retryAfterMs?: number | null }): LakeshoreError {
  switch (code) {
    case 'bad_request':
      return new BadRequestError(message);
    case 'payload_too_large':
      return new PayloadTooLargeError(message);
    case 'unauthorized':
      return new UnauthorizedError(message);
    case 'forbidden':
      return new ForbiddenError(message);
    case 'not_found':
      return new NotFoundError(message);
    case 'conflict':
      return new FencingConflictError(message);
    case 'rate_limited':
      return new RateLimitedError(message, extra?.retryAfterMs ?? null);
    case 'timeout':
      return new TimeoutError(message);
    case 'storage_full':
      return new StorageFullError(message);
    case 'unavailable':
      return new UnavailableError(message);
    default:
      return new LakeshoreError('internal', message);
  }
}

/**
 * A job a wait on many answered (`results`): its result, or the error `result()` would throw for
 * it (InvocationFailedError, InvocationCancelledError; NotFoundError when its queue has no such job).
 */
export type Ended = { id: string; ok: true; result: Uint8Array | null } | { id: string; ok: false; error: Error };

/** What `result()` answers for an ended job: its result bytes, or the error of its end. */
export function outcomeResult(id: string, outcome: Outcome): Uint8Array | null {
  const e = endedOf(id, outcome);
  if (e.ok) return e.result;
  throw e.error;
}

/** What a wait on many answered of one job that ended (`results`), as `Ended`. */
export function endedOf(id: string, outcome: Outcome): Ended {
  if (outcome.state === 'succeeded') return { id, ok: true, result: outcome.result };
  if (outcome.state === 'failed') return { id, ok: false, error: new InvocationFailedError(id, outcome.error) };
  if (outcome.state === 'cancelled') return { id, ok: false, error: new InvocationCancelledError(id) };
  throw new LakeshoreError('internal', `a wait on many answered ${id} while it is ${outcome.state}`);
}

/** Re-raises a plane's LakeshoreError as its client class (the local plane runs the engine in-process). */
export function asClientError(e: unknown): unknown {
  if (e instanceof LakeshoreError && e.constructor === LakeshoreError) return errorFor(e.code, e.message);
  return e;
}
