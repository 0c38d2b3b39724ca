/**
 * One error class with an HTTP status and a stable machine code. The HTTP layer maps it to
 * `{error: {code, message}}`; clients map the code back to the same class.
 */
export const ERROR_CODES = Object.freeze({
  bad_request: 400,
  unauthorized: 401,
  forbidden: 403,
  not_found: 404,
  conflict: 409,
  payload_too_large: 413,
  rate_limited: 429,
  /** The database (the namespace's shard) is past its storage high-water mark: new work is refused, the rest goes on. */
  storage_full: 507,
  timeout: 504,
  /**
   * The plane could not be reached (connection refused or cut) for as long as the client retried;
   * or, answered by the plane, the namespace is being moved to another shard for a moment. Retried.
   */
  unavailable: 503,
  internal: 500,
} as const);
export type ErrorCode = keyof typeof ERROR_CODES;

export class LakeshoreError extends Error {
  readonly code: ErrorCode;
  readonly status: number;
  /** Whether retrying the same request later may succeed. */
  readonly retryable: boolean;
  /** For rate_limited: how long to wait before retrying (HTTP Retry-After). */
  readonly retryAfterMs: number | undefined;

  constructor(code: ErrorCode, message: string, options?: { cause?: unknown; retryable?: boolean; retryAfterMs?: number }) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'LakeshoreError';
    this.code = code;
    this.status = ERROR_CODES[code];
    this.retryable = options?.retryable ?? (code === 'rate_limited' || code === 'internal');
    this.retryAfterMs = options?.retryAfterMs;
  }

  toJSON(): { code: ErrorCode; message: string } {
    return { code: this.code, message: this.message };
  }
}

export const badRequest = (message: string) => new LakeshoreError('bad_request', message);
export const notFound = (what: string) => new LakeshoreError('not_found', `${what} not found`);

/** An id with no row: never submitted in this namespace, or purged after its queue's retention. */
export const invocationNotFound = (id: unknown) => new LakeshoreError('not_found', noInvocation(id));
/** What a reader of an id with no row is told, by the plane and by the CLI alike. */
export const noInvocation = (id: unknown) =>
  `invocation ${JSON.stringify(id)} not found: never submitted in this namespace, or it finished longer ago than its queue's retention and was purged`;
/** An id a wait on many jobs of `queue` named that the queue does not have (core/results.ts). */
export const notInQueue = (id: string, queue: string) =>
  new LakeshoreError(
    'not_found',
    `invocation ${JSON.stringify(id)} is not in queue ${JSON.stringify(queue)}: never submitted to it, or purged after its retention`,
  );
/** A fencing miss: the caller no longer holds the invocation (re-dispatched, expired or finished). */
export const fenced = (message: string) => new LakeshoreError('conflict', message);
/** A transition that the row's state does not allow (a retry of a job that did not fail, say). */
export const conflict = (message: string) => new LakeshoreError('conflict', message);

export const isErrorCode = (c: unknown): c is ErrorCode => typeof c === 'string' && c in ERROR_CODES;

/** Normalises anything thrown into an Error, keeping the original as `cause`. */
export function toError(e: unknown): Error {
  if (e instanceof Error) return e;
  return new Error(typeof e === 'string' ? e : 'non-error thrown', { cause: e });
}
