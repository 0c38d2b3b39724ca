/**
 * One HTTP request to the plane, as the client makes every one: bearer token, timeout on top of
 * any wait the request asks for, the plane's `{error: {code, message}}` turned into the error
 * class of its code, and retries of a plane that is away or busy.
 *
 * A connection that fails (the plane restarting) or a 429/503 is retried with backoff (429: after
 * its Retry-After) for up to `retryForMs`. Every verb is safe to repeat: submits carry their id,
 * acks/nacks/appends are fenced and absorbed when repeated, and a claim whose answer was lost
 * only leaves its rows to lease expiry.
 */
import { errorFor, LakeshoreError, TimeoutError } from '../errors.ts';
import { finiteOnly, type Json } from './wire.ts';
import { jsonValue } from '../../src/core/validate.ts';

/** Deeper than this a body is not sent (the plane's own limit on free-form values is far lower: 64 by default). */
const SENDABLE_DEPTH = 1000;

export interface TransportOptions {
  token?: string;
  timeout: number;
  retryForMs?: number;
  fetch?: typeof fetch;
}

export class Transport {
  private readonly base: string;
  private readonly token: string | undefined;
  private readonly timeout: number;
  private readonly retryForMs: number;
  private readonly fetchImpl: typeof fetch;

  /** `base`: the namespace's URL prefix (`…/v1/ns/<ns>`); paths are relative to it. */
  constructor(base: string, opts: TransportOptions) {
    this.base = base;
    this.token = opts.token;
    this.timeout = opts.timeout;
    this.retryForMs = opts.retryForMs ?? 15_000;
    this.fetchImpl = opts.fetch ?? globalThis.fetch.bind(globalThis);
  }

  /** A JSON request; answers the JSON body of a 2xx, throws the error of anything else. */
  async call(method: string, path: string, body?: unknown, opts: { waitMs?: number; signal?: AbortSignal } = {}): Promise<Json> {
    // JSON.stringify recurses: a value nested past any plane's limit is refused here, not a stack overflow.
    if (body !== undefined) {
      try {
        jsonValue('request body', body, SENDABLE_DEPTH);
      } catch (e) {
        throw errorFor('bad_request', (e as Error).message);
      }
    }
    const giveUp = Date.now() + this.retryForMs;
    for (let attempt = 0; ; attempt++) {
      const backoff = Math.min(1_000, 25 * 2 ** attempt) * (0.5 + Math.random() / 2);
      let res: Response;
      try {
        res = await this.once(method, path, body, opts);
      } catch (e) {
        if (!isConnectionError(e) || opts.signal?.aborted || Date.now() + backoff > giveUp) throw e;
        await sleep(backoff, opts.signal);
        continue;
      }
      if (res.ok) return (await res.json()) as Json;
      const err = await errorOf(res);
      const wait = res.status === 429 ? Math.max(backoff, err.retryAfterMs ?? 0) : backoff;
      if (!(res.status === 429 || res.status === 503) || opts.signal?.aborted || Date.now() + wait > giveUp) throw err;
      await sleep(wait, opts.signal);
    }
  }

  /** A raw request with the token (a stream, say); the caller reads the answer. */
  fetch(path: string, init: RequestInit & { headers?: Record<string, string> }): Promise<Response> {
    return this.fetchImpl(this.base + path, { ...init, headers: { ...this.auth(), ...init.headers } });
  }

  private async once(method: string, path: string, body: unknown, opts: { waitMs?: number; signal?: AbortSignal }): Promise<Response> {
    const limit = this.timeout + (opts.waitMs ?? 0);
    const signals = [AbortSignal.timeout(limit)];
    if (opts.signal) signals.push(opts.signal);
    try {
      return await this.fetch(path, {
        method,
        headers: body === undefined ? {} : { 'content-type': 'application/json' },
        body: body === undefined ? undefined : JSON.stringify(body, finiteOnly),
        signal: AbortSignal.any(signals),
      });
    } catch (e) {
      if (e instanceof Error && e.name === 'TimeoutError') throw new TimeoutError(`${method} ${path} got no answer within ${limit} ms`);
      throw e;
    }
  }

  private auth(): Record<string, string> {
    return this.token ? { authorization: `Bearer ${this.token}` } : {};
  }
}

/** The plane's error answer as the error class of its code (with Retry-After, when given). */
export async function errorOf(res: Response): Promise<LakeshoreError> {
  let code = 'internal';
  let message = `HTTP ${res.status}`;
  try {
    const j = (await res.json()) as { error?: { code?: string; message?: string } };
    if (j.error?.code) code = j.error.code;
    if (j.error?.message) message = j.error.message;
  } catch {
    /* not a JSON error body */
  }
  const ra = res.headers.get('retry-after');
  return errorFor(code, message, { retryAfterMs: ra ? Number(ra) * 1000 : null });
}

/** A failure to reach the plane at all (refused, reset, closed mid-answer), as undici reports it. */
function isConnectionError(e: unknown): boolean {
  if (!(e instanceof Error) || e.name === 'AbortError' || e instanceof TimeoutError) return false;
  const code = (e.cause as { code?: string } | undefined)?.code ?? '';
  return e instanceof TypeError || /^(ECONNREFUSED|ECONNRESET|EPIPE|UND_ERR_SOCKET|UND_ERR_CLOSED)$/.test(code);
}

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise<void>((r) => {
    const t = setTimeout(r, ms);
    signal?.addEventListener('abort', () => { clearTimeout(t); r(); }, { once: true });
  });
}
