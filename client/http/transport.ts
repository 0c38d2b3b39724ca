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
import { errorFor, LakeshoreError, TimeoutError, UnavailableError } from '../errors.ts';
import { finiteOnly, type Json } from './wire.ts';
import { jsonValue } from '../../src/core/validate.ts';
import { CLIENT_VERSION } from '../version.ts';
import { fetchRequester, nodeRequester, type Answer, type Requester } from './requester.ts';

/** Sent by node:http requests (fetch sends its own). */
const USER_AGENT = `lakeshore-client/${CLIENT_VERSION} (node)`;

/** Deeper than this a body is not sent (the plane's own limit on free-form values is far lower: 64 by default). */
const SENDABLE_DEPTH = 1000;

export interface TransportOptions {
  token?: string;
  /** Per-request timeout in ms, on top of any wait the request asks the plane for. Default 30 s. */
  timeout: number;
  /** How long to keep retrying a request whose connection failed, or that got 429/503 (default 15 s; 0: never). */
  retryForMs?: number;
  /**
   * Makes every request with this fetch (a proxy's, a test's). Without it, the client's calls go
   * through node:http with a keep-alive pool where the runtime has it (Node, Bun, Deno: a third of
   * fetch's CPU per request; requester.ts), else through the global fetch; streams (journals, the
   * event feed) and code archives always use fetch.
   */
  fetch?: typeof fetch;
  /**
   * Told at once (once per request) when the plane cannot be reached and the request will be
   * retried (the CLI prints it); once retries run out the request fails with UnavailableError.
   */
  onUnreachable?: (message: string) => void;
  /**
   * Told once when the plane goes away (no request of this client reaches it) and once when it is
   * back, however many requests wait meanwhile: what a long-running worker logs.
   */
  onOutage?: (event: { away: true; message: string } | { away: false; awayMs: number }) => void;
  /** The longest pause between two tries of a request (default 1 s; a worker waiting out an outage uses more). */
  maxBackoffMs?: number;
}

export class Transport {
  private readonly base: string;
  private readonly token: string | undefined;
  private readonly timeout: number;
  private readonly retryForMs: number;
  private readonly fetchImpl: typeof fetch;
  private readonly onUnreachable: ((message: string) => void) | undefined;
  private readonly onOutage: TransportOptions['onOutage'];
  private readonly maxBackoffMs: number;
  /** Since when no request has reached the plane, or null while they do. */
  private awaySince: number | null = null;
  private requester: Promise<Requester> | null = null;
  private readonly ownFetch: boolean;

  /** `base`: the namespace's URL prefix (`…/v1/ns/<ns>`); paths are relative to it. */
  constructor(base: string, opts: TransportOptions) {
    this.base = base;
    this.token = opts.token;
    this.timeout = opts.timeout;
    this.retryForMs = opts.retryForMs ?? 15_000;
    this.fetchImpl = opts.fetch ?? globalThis.fetch.bind(globalThis);
    this.ownFetch = opts.fetch !== undefined;
    this.onUnreachable = opts.onUnreachable;
    this.onOutage = opts.onOutage;
    this.maxBackoffMs = opts.maxBackoffMs ?? 1_000;
  }

  /** The plane answered: if it had been away, it is back. */
  private reached(): void {
    if (this.awaySince === null) return;
    const awayMs = Date.now() - this.awaySince;
    this.awaySince = null;
    this.onOutage?.({ away: false, awayMs });
  }

  private lost(why: string): void {
    if (this.awaySince !== null) return;
    this.awaySince = Date.now();
    const until = Number.isFinite(this.retryForMs) ? `for up to ${Math.round(this.retryForMs / 1000)} s` : 'until it is back';
    this.onOutage?.({ away: true, message: `cannot reach the plane at ${this.origin()} (${why}); retrying ${until}` });
  }

  /** Closes the idle connections the calls keep open. */
  close(): void {
    void this.requester?.then((r) => r.close());
    this.requester = null;
  }

  /** node:http where the runtime has it and no fetch was given, else fetch; chosen once. */
  private requesterOf(): Promise<Requester> {
    this.requester ??= (this.ownFetch ? Promise.resolve(null) : nodeRequester(USER_AGENT)).then((r) => r ?? fetchRequester(this.fetchImpl));
    return this.requester;
  }

  /** A JSON request; answers the JSON body of a 2xx, throws the error of anything else. */
  async call(
    method: string,
    path: string,
    body?: unknown,
    opts: { waitMs?: number; signal?: AbortSignal; retryForMs?: number } = {},
  ): Promise<Json> {
    // JSON.stringify recurses: a value nested past any plane's limit is refused here, not a stack overflow.
    if (body !== undefined) {
      try {
        jsonValue('request body', body, SENDABLE_DEPTH);
      } catch (e) {
        throw errorFor('bad_request', (e as Error).message);
      }
    }
    // A call that is best effort (a worker saying it stopped) says how long it may try, else the client's bound.
    const giveUp = Date.now() + (opts.retryForMs ?? this.retryForMs);
    for (let attempt = 0; ; attempt++) {
      // Capped exponential backoff with jitter (half to all of the step).
      const backoff = Math.min(this.maxBackoffMs, 25 * 2 ** Math.min(attempt, 20)) * (0.5 + Math.random() / 2);
      let out: Json | { error: LakeshoreError; status: number };
      try {
        out = await this.once(method, path, body, opts);
        this.reached();
      } catch (e) {
        if (!isConnectionError(e) || opts.signal?.aborted) throw e;
        const why = reasonOf(e);
        this.lost(why);
        if (Date.now() + backoff > giveUp) {
          throw new UnavailableError(
            `cannot reach the plane at ${this.origin()}: ${why}${attempt && Number.isFinite(this.retryForMs) ? ` (tried for ${Math.round(this.retryForMs / 1000)} s)` : ''}`,
            e,
          );
        }
        if (attempt === 0)
          this.onUnreachable?.(
            `cannot reach the plane at ${this.origin()} (${why}); retrying for up to ${Math.round(this.retryForMs / 1000)} s`,
          );
        await sleep(backoff, opts.signal);
        continue;
      }
      if (!(out.error instanceof LakeshoreError)) return out;
      const { error, status } = out as { error: LakeshoreError; status: number };
      const wait = status === 429 ? Math.max(backoff, error.retryAfterMs ?? 0) : backoff;
      if (!(status === 429 || status === 503) || opts.signal?.aborted || Date.now() + wait > giveUp) throw error;
      await sleep(wait, opts.signal);
    }
  }

  /** A raw request with the token (a stream, say); the caller reads the answer. */
  fetch(path: string, init: RequestInit & { headers?: Record<string, string> }): Promise<Response> {
    return this.fetchImpl(this.url(path), { ...init, headers: { ...this.auth(), ...init.headers } });
  }

  /** A path's URL: relative to the namespace's prefix, or (`/v1/...`, the deployment's routes) to the plane's. */
  private url(path: string): string {
    return path.startsWith('/v1/') ? this.origin() + path : this.base + path;
  }

  /**
   * One request: its JSON answer, or the error the plane answered and its HTTP status. The caller's signal and the
   * timeout abort it only until the answer is in: a streamed answer (a claim that waited, see
   * src/worker/long-poll.ts) is used as soon as its line is read, and the rest of its body is
   * read to the end, since a client that hangs up inside it would give its jobs back.
   */
  private async once(
    method: string,
    path: string,
    body: unknown,
    opts: { waitMs?: number; signal?: AbortSignal },
  ): Promise<Json | { error: LakeshoreError; status: number }> {
    const limit = this.timeout + (opts.waitMs ?? 0);
    const requester = await this.requesterOf();
    const ac = new AbortController();
    let answered = false;
    const abort = (reason: unknown) => !answered && ac.abort(reason);
    const onAbort = () => abort(opts.signal!.reason);
    if (opts.signal?.aborted) onAbort();
    opts.signal?.addEventListener('abort', onAbort, { once: true });
    const timer = setTimeout(() => abort(new TimeoutError(`${method} ${path} got no answer within ${limit} ms`)), limit);
    try {
      const headers: Record<string, string> = body === undefined ? this.auth() : { ...this.auth(), 'content-type': 'application/json' };
      if (this.bookmark) headers[BOOKMARK] = this.bookmark;
      const res = await requester.send(
        method,
        this.url(path),
        headers,
        body === undefined ? undefined : JSON.stringify(body, finiteOnly),
        ac.signal,
      );
      this.noteBookmark(res.header(BOOKMARK));
      if (res.status < 200 || res.status > 299) {
        const error = await errorOfAnswer(res);
        // A refusal of no token at all: say where one goes (the plane's words speak to HTTP, not to a user).
        if (res.status === 401 && !this.token) error.message += ' (no token was sent: set LAKESHORE_TOKEN, or pass a token)';
        return { error, status: res.status };
      }
      const j = await answerOf(res, () => (answered = true));
      // A streamed refusal (the claim waited, then its queue was fenced: 503) is retried as the same refusal unstreamed would be.
      return j instanceof LakeshoreError ? { error: j, status: j.status } : j;
    } catch (e) {
      if (ac.signal.reason instanceof TimeoutError) throw ac.signal.reason;
      throw e;
    } finally {
      clearTimeout(timer);
      opts.signal?.removeEventListener('abort', onAbort);
    }
  }

  private origin(): string {
    return this.base.replace(/\/v1\/ns\/[^/]*$/, '');
  }

  /**
   * The newest bookmark the plane's answers gave (`<shard>:<D1 bookmark>`), sent with each request:
   * the Worker's reads then see this client's writes, even from a read replica (docs/contract.md,
   * "Reads and replicas"). A bookmark of another shard (the namespace moved) replaces it.
   */
  private bookmark: string | null = null;

  private noteBookmark(b: string | null): void {
    if (!b) return;
    const shard = (x: string) => x.slice(0, x.indexOf(':'));
    if (!this.bookmark || shard(b) !== shard(this.bookmark) || b > this.bookmark) this.bookmark = b;
  }

  private auth(): Record<string, string> {
    return this.token ? { authorization: `Bearer ${this.token}` } : {};
  }
}

const BOOKMARK = 'x-lakeshore-bookmark';

/**
 * A 2xx answer's JSON. A streamed answer is whitespace, one JSON line, then a tail: it is parsed
 * once its line is in (`answered` is told), and the tail is read to its end in the background. A
 * streamed `{"error": {code, message}}` is that error (answered, for `call` to retry or throw). Anything else is read whole.
 */
async function answerOf(res: Answer, answered: () => void): Promise<Json | LakeshoreError> {
  const dec = new TextDecoder();
  let text = '';
  for (;;) {
    const value = await res.read();
    if (value === null) break;
    // Only the new piece is searched: a plain answer has no newline, and a large one comes in many pieces.
    const piece = dec.decode(value, { stream: true });
    const at = piece.indexOf('\n');
    const nl = at < 0 ? -1 : text.length + at;
    text += piece;
    if (nl >= 0 && text.slice(0, nl).trim()) {
      answered();
      void drain(res);
      const j = JSON.parse(text.slice(0, nl)) as Json;
      const err = j.error as { code?: string; message?: string } | undefined;
      if (Object.keys(j).length === 1 && err?.code) return errorFor(err.code, err.message ?? 'the plane failed the call');
      return j;
    }
  }
  answered();
  text += dec.decode();
  return text ? (JSON.parse(text) as Json) : {};
}

async function drain(res: Answer) {
  try {
    while ((await res.read()) !== null);
  } catch {
    /* the connection broke after the answer: nothing more to read */
  }
}

/** An error answer's body, whole (it is small), as the error class of its code. */
async function errorOfAnswer(res: Answer): Promise<LakeshoreError> {
  const dec = new TextDecoder();
  let text = '';
  try {
    for (let piece = await res.read(); piece !== null; piece = await res.read()) text += dec.decode(piece, { stream: true });
  } catch {
    /* cut short: what came is all there is */
  }
  return errorFrom(res.status, text + dec.decode(), res.header('retry-after'));
}

/** The plane's error answer as the error class of its code (with Retry-After, when given). */
export async function errorOf(res: Response): Promise<LakeshoreError> {
  return errorFrom(res.status, await res.text().catch(() => ''), res.headers.get('retry-after'));
}

function errorFrom(status: number, text: string, retryAfter: string | null): LakeshoreError {
  let code = 'internal';
  let message = `HTTP ${status}`;
  try {
    const j = JSON.parse(text) as { error?: { code?: string; message?: string } };
    if (j.error?.code) code = j.error.code;
    if (j.error?.message) message = j.error.message;
  } catch {
    /* not a JSON error body */
  }
  return errorFor(code, message, { retryAfterMs: retryAfter ? Number(retryAfter) * 1000 : null });
}

/** A connection failure in a few words: its system code (ECONNREFUSED) or its message. */
function reasonOf(e: unknown): string {
  const cause = (e as { cause?: { code?: string; message?: string } }).cause;
  return cause?.code ?? cause?.message ?? (e instanceof Error ? e.message : String(e));
}

/** A failure to reach the plane at all (refused, reset, closed mid-answer), as fetch and requester.ts report it. */
function isConnectionError(e: unknown): boolean {
  if (!(e instanceof Error) || e.name === 'AbortError' || e instanceof TimeoutError) return false;
  const code = (e.cause as { code?: string } | undefined)?.code ?? '';
  return e instanceof TypeError || /^(ECONNREFUSED|ECONNRESET|EPIPE|UND_ERR_SOCKET|UND_ERR_CLOSED)$/.test(code);
}

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise<void>((r) => {
    const t = setTimeout(r, ms);
    signal?.addEventListener(
      'abort',
      () => {
        clearTimeout(t);
        r();
      },
      { once: true },
    );
  });
}
