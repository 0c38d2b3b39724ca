/**
 * The signing keys of the plane's own tokens (stream tokens, src/worker/stream-token.ts; delivery
 * tokens, delivery-token.ts): HMAC-SHA-256 keys from the secret STREAM_TOKEN_KEYS (comma-separated;
 * the first signs, every one verifies) or, unset, one derived from LAKESHORE_TOKEN.
 */
import { toBase64, utf8 } from './bytes.ts';
import { LakeshoreError } from './errors.ts';
/** UTF-8 bytes, typed as WebCrypto takes them. */
export const text = (s: string) => utf8(s) as Uint8Array<ArrayBuffer>;

export interface Key {
  kid: string;
  key: CryptoKey;
}

const URL_SAFE: Record<string, string> = { '+': '-', '/': '_', '=': '' };
/** base64url with no padding, by the runtime's own base64 (bytes.ts): a pushed job's token takes two. */
export const b64url = (bytes: Uint8Array): string => toBase64(bytes).replace(/[+/=]/g, (ch) => URL_SAFE[ch]!);

export function fromB64url(s: string): Uint8Array | null {
  if (!/^[A-Za-z0-9_-]*$/.test(s)) return null;
  try {
    const bin = atob(s.replace(/-/g, '+').replace(/_/g, '/') + '='.repeat((4 - (s.length % 4)) % 4));
    return Uint8Array.from(bin, (ch) => ch.charCodeAt(0));
  } catch {
    return null;
  }
}

const hmacKey = (raw: Uint8Array<ArrayBuffer>, usages: ('sign' | 'verify')[]) =>
  crypto.subtle.importKey('raw', raw, { name: 'HMAC', hash: 'SHA-256' }, false, usages);

async function keyOf(secret: string): Promise<Key> {
  const raw = text(secret);
  const kid = b64url(new Uint8Array(await crypto.subtle.digest('SHA-256', raw)).slice(0, 6));
  return { kid, key: await hmacKey(raw, ['sign', 'verify']) };
}

/** The keys of a deployment (its vars): STREAM_TOKEN_KEYS, or one derived from the root token. Cached per isolate. */
const keyring = new Map<string, Promise<Key[]>>();
export function signingKeys(e: Record<string, string | undefined>): Promise<Key[]> {
  const listed = (e.STREAM_TOKEN_KEYS ?? '')
    .split(',')
    .map((k) => k.trim())
    .filter(Boolean);
  const cacheKey = listed.length ? `keys\u0000${listed.join('\u0000')}` : `root\u0000${e.LAKESHORE_TOKEN ?? ''}`;
  let ring = keyring.get(cacheKey);
  if (!ring) {
    if (keyring.size >= 16) keyring.clear();
    ring = (async () => {
      if (listed.length) {
        const short = listed.find((k) => k.length < 32);
        if (short !== undefined) throw new LakeshoreError('internal', 'every STREAM_TOKEN_KEYS key must be at least 32 characters');
        return Promise.all(listed.map(keyOf));
      }
      const root = e.LAKESHORE_TOKEN;
      if (!root) throw new LakeshoreError('internal', 'the plane has no LAKESHORE_TOKEN secret configured');
      // HMAC(root, label): a key only this deployment can compute, and one that is not the root token.
      const derive = await hmacKey(text(root), ['sign']);
      const derived = new Uint8Array(await crypto.subtle.sign('HMAC', derive, text('lakeshore stream-token key v1')));
      return [await keyOf(b64url(derived))];
    })();
    ring.catch(() => keyring.delete(cacheKey));
    keyring.set(cacheKey, ring);
  }
  return ring;
}
