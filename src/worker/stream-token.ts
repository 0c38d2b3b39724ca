/**
 * Stream tokens: short-lived, read-only tokens for one invocation, minted by a producer (or admin)
 * and handed to a browser, which cannot send an Authorization header from an EventSource and so
 * presents the token in the URL (`?access_token=`).
 *
 *   lss_<claims>.<signature>
 *
 * `claims` is base64url JSON `{v, ns, q, id, exp, jti, k, s}`: namespace, queue, invocation, expiry
 * (epoch ms), a random token id (its own gate key: rate and stream cap), the signing key's id and the
 * token's stream cap. `signature` is base64url HMAC-SHA-256 over `lss1.<claims>` with a key the
 * deployment holds. Verifying needs no D1 read: the claims are the whole authorization.
 *
 * Keys: the secret `STREAM_TOKEN_KEYS`, a comma-separated list. The first signs; every one verifies,
 * so a key is rotated by putting the new one first, and removing the old one once the longest TTL has
 * passed. Unset, one key is derived from LAKESHORE_TOKEN (rotating that rotates this too).
 */
import { badRequest, LakeshoreError } from '../core/errors.ts';
import { fromUtf8, utf8 } from '../core/bytes.ts';
import { b64url, fromB64url, type Key, signingKeys } from '../core/signing.ts';

/** The keys of a deployment: STREAM_TOKEN_KEYS, or one derived from the root token (core/signing.ts). */
export const streamKeys = (env: Env): Promise<Key[]> => signingKeys(env as unknown as Record<string, string | undefined>);

export const STREAM_TOKEN_PREFIX = 'lss_';
export const DEFAULT_STREAM_TTL_MS = 15 * 60_000;
export const MAX_STREAM_TTL_MS = 24 * 3600_000;
/** Open SSE streams one stream token may hold at once (its own cap, not its minter's). */
export const DEFAULT_STREAM_TOKEN_STREAMS = 8;
export const MAX_STREAM_TOKEN_STREAMS = 10_000;

export interface StreamClaims {
  ns: string;
  queue: string;
  id: string;
  /** Expiry, epoch ms. */
  exp: number;
  /** The token's own id: its gate (rate and stream cap) is `stream:<jti>`. */
  jti: string;
  /** Its open-stream cap. */
  streams: number;
}

const signed = (claims: string) => utf8(`lss1.${claims}`);

/** A signed stream token for `claims`. */
export async function mintStreamToken(keys: Key[], c: StreamClaims): Promise<string> {
  const k = keys[0]!;
  const claims = b64url(utf8(JSON.stringify({ v: 1, ns: c.ns, q: c.queue, id: c.id, exp: c.exp, jti: c.jti, k: k.kid, s: c.streams })));
  const sig = new Uint8Array(await crypto.subtle.sign('HMAC', k.key, signed(claims)));
  return `${STREAM_TOKEN_PREFIX}${claims}.${b64url(sig)}`;
}

const refused = (why: string) => new LakeshoreError('unauthorized', why);

/**
 * The claims of a valid, unexpired stream token, or a 401 saying which of those it is not. The
 * signature is checked by `crypto.subtle.verify`, which compares in constant time.
 */
export async function verifyStreamToken(keys: Key[], token: string, now: number): Promise<StreamClaims> {
  const m = /^lss_([A-Za-z0-9_-]{1,2048})\.([A-Za-z0-9_-]{43})$/.exec(token);
  if (!m) throw refused('malformed stream token');
  const [, claims, sig] = m as unknown as [string, string, string];
  let c: Record<string, unknown>;
  try {
    c = JSON.parse(fromUtf8(fromB64url(claims) ?? new Uint8Array()));
  } catch {
    throw refused('malformed stream token');
  }
  const key = keys.find((k) => k.kid === c.k);
  const sigBytes = fromB64url(sig);
  // Only the canonical spelling: its last character has spare bits that decoding would ignore.
  const canonical = sigBytes !== null && b64url(sigBytes) === sig;
  if (!key || !sigBytes || !canonical || !(await crypto.subtle.verify('HMAC', key.key, sigBytes, signed(claims)))) {
    throw refused('stream token signature does not verify (tampered, or signed with a key this plane no longer holds)');
  }
  if (
    c.v !== 1 ||
    typeof c.ns !== 'string' ||
    typeof c.q !== 'string' ||
    typeof c.id !== 'string' ||
    typeof c.exp !== 'number' ||
    typeof c.jti !== 'string' ||
    typeof c.s !== 'number'
  ) {
    throw refused('malformed stream token');
  }
  if (c.exp <= now) throw refused(`stream token expired at ${new Date(c.exp).toISOString()}: ask the application for a new one`);
  return { ns: c.ns, queue: c.q, id: c.id, exp: c.exp, jti: c.jti, streams: c.s };
}

/** A TTL from a request body: default 15 minutes, at most 24 hours. */
export function streamTtl(v: unknown): number {
  if (v === undefined || v === null) return DEFAULT_STREAM_TTL_MS;
  if (typeof v !== 'number' || !Number.isInteger(v) || v < 1000 || v > MAX_STREAM_TTL_MS) {
    throw badRequest(`ttl_ms must be an integer from 1000 to ${MAX_STREAM_TTL_MS} (24 hours)`);
  }
  return v;
}

export function streamCap(v: unknown): number {
  if (v === undefined || v === null) return DEFAULT_STREAM_TOKEN_STREAMS;
  if (typeof v !== 'number' || !Number.isInteger(v) || v < 1 || v > MAX_STREAM_TOKEN_STREAMS) {
    throw badRequest(`streams must be an integer from 1 to ${MAX_STREAM_TOKEN_STREAMS}`);
  }
  return v;
}

export const newJti = () => b64url(crypto.getRandomValues(new Uint8Array(12)));
