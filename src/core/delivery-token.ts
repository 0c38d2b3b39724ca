/**
 * Delivery tokens (docs/contract.md, "Push delivery"): the credential a pushed delivery carries, for
 * one job and one attempt. With it the receiver may append frames, heartbeat, and ack or nack that
 * attempt (answer 202 now, finish later), and read that job; nothing else.
 *
 *   lsd_<claims>.<signature>
 *
 * `claims` is base64url JSON `{v, ns, q, id, a, w, exp, k}`: namespace, queue, invocation, attempt,
 * the pusher's worker id, expiry (epoch ms) and the signing key's id. `signature` is base64url
 * HMAC-SHA-256 over `lsd1.<claims>` with the plane's signing keys (signing.ts), the label keeping it
 * apart from a stream token's. The attempt's fence does the rest: once the attempt is over (acked,
 * nacked, its lease ran out, cancelled), its token's writes are refused like a late worker's.
 */
import { fromUtf8 } from './bytes.ts';
import { LakeshoreError } from './errors.ts';
import { b64url, fromB64url, type Key, text } from './signing.ts';

export const DELIVERY_TOKEN_PREFIX = 'lsd_';
/** A delivery token lasts a day at most; its attempt's lease is what bounds it in practice. */
export const DELIVERY_TOKEN_TTL_MS = 24 * 3600_000;

export interface DeliveryClaims {
  ns: string;
  queue: string;
  id: string;
  attempt: number;
  workerId: string;
  exp: number;
}

const signed = (claims: string) => text(`lsd1.${claims}`);

export async function mintDeliveryToken(keys: Key[], c: DeliveryClaims): Promise<string> {
  const k = keys[0]!;
  const json = JSON.stringify({ v: 1, ns: c.ns, q: c.queue, id: c.id, a: c.attempt, w: c.workerId, exp: c.exp, k: k.kid });
  const claims = b64url(text(json));
  const sig = new Uint8Array(await crypto.subtle.sign('HMAC', k.key, signed(claims)));
  return `${DELIVERY_TOKEN_PREFIX}${claims}.${b64url(sig)}`;
}

const refused = (why: string) => new LakeshoreError('unauthorized', why);

/** The claims of a valid, unexpired delivery token, or a 401 saying which of those it is not. */
export async function verifyDeliveryToken(keys: Key[], token: string, now: number): Promise<DeliveryClaims> {
  const m = /^lsd_([A-Za-z0-9_-]{1,4096})\.([A-Za-z0-9_-]{43})$/.exec(token);
  if (!m) throw refused('malformed delivery token');
  const [, claims, sig] = m as unknown as [string, string, string];
  let c: Record<string, unknown>;
  try {
    c = JSON.parse(fromUtf8(fromB64url(claims) ?? new Uint8Array()));
  } catch {
    throw refused('malformed delivery token');
  }
  const key = keys.find((k) => k.kid === c.k);
  const sigBytes = fromB64url(sig);
  const canonical = sigBytes !== null && b64url(sigBytes) === sig;
  if (
    !key ||
    !sigBytes ||
    !canonical ||
    !(await crypto.subtle.verify('HMAC', key.key, sigBytes as Uint8Array<ArrayBuffer>, signed(claims)))
  )
    throw refused('delivery token signature does not verify (tampered, or signed with a key this plane no longer holds)');
  if (
    c.v !== 1 ||
    typeof c.ns !== 'string' ||
    typeof c.q !== 'string' ||
    typeof c.id !== 'string' ||
    typeof c.a !== 'number' ||
    typeof c.w !== 'string' ||
    typeof c.exp !== 'number'
  )
    throw refused('malformed delivery token');
  if (c.exp <= now) throw refused(`delivery token expired at ${new Date(c.exp).toISOString()}`);
  return { ns: c.ns, queue: c.q, id: c.id, attempt: c.a, workerId: c.w, exp: c.exp };
}
