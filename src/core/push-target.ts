/**
 * A queue's push target (docs/contract.md, "Push delivery"): where its jobs are POSTed when no
 * worker pulls them, checked; its `whsec_` signing secret; and the Standard Webhooks signature
 * (https://www.standardwebhooks.com) each delivery carries. Platform-neutral: WebCrypto, as
 * workerd and Node both have it.
 */
import { badRequest } from './errors.ts';

/** Where a plane may push: `local` (a plane on this machine: http on loopback too) or `public` (deployed). */
export type PushHosts = 'local' | 'public';

export const DEFAULT_PUSH_CONCURRENCY = 8;
export const MAX_PUSH_CONCURRENCY = 1_000;
export const DEFAULT_PUSH_TIMEOUT_MS = 30_000;
/** A delivery's request may take up to 15 minutes: a receiver that needs longer answers 202 and finishes with its delivery token. */
export const MAX_PUSH_TIMEOUT_MS = 15 * 60_000;
/** Jobs in one delivery: 1 (the default) POSTs each job alone; more POSTs up to that many in one `lakeshore.batch`. */
export const DEFAULT_PUSH_BATCH_SIZE = 1;
export const MAX_PUSH_BATCH_SIZE = 100;
/** After a rotation, deliveries are signed with the old secret too, this long. */
export const OLD_SECRET_MS = 24 * 3600_000;

/** A push target as its queue's settings show it. `secret` only in the answer that set or rotated it. */
export interface PushSettings {
  url: string;
  concurrency: number;
  timeoutMs: number;
  batchSize: number;
  secret?: string;
}

/** What the plane needs to deliver: the target and the secrets to sign with (newest first). */
export interface PushTarget {
  url: string;
  /** Deliveries (requests) at once. */
  concurrency: number;
  timeoutMs: number;
  /** Most jobs in one delivery; above 1 every delivery is a batch. */
  batchSize: number;
  secrets: string[];
}

const LOOPBACK = /^(localhost|127(?:\.\d{1,3}){3}|\[::1\])$/i;

/**
 * IPv4 and IPv6 literals of private, link-local, shared, unspecified and multicast ranges: a
 * deployed plane does not push there (the target would be the operator's own network).
 */
function privateHost(host: string): boolean {
  const h = host.replace(/^\[|\]$/g, '').toLowerCase();
  if (h === 'localhost' || h.endsWith('.localhost') || h.endsWith('.local') || h.endsWith('.internal')) return true;
  const v4 = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/.exec(h);
  if (v4) {
    const [a, b] = [Number(v4[1]), Number(v4[2])];
    return (
      a === 0 ||
      a === 10 ||
      a === 127 ||
      (a === 100 && b >= 64 && b <= 127) ||
      (a === 169 && b === 254) ||
      (a === 172 && b >= 16 && b <= 31) ||
      (a === 192 && b === 168) ||
      (a === 198 && (b === 18 || b === 19)) ||
      a >= 224
    );
  }
  if (h.includes(':')) {
    if (h === '::' || h === '::1') return true;
    if (/^(fc|fd|fe8|fe9|fea|feb|ff)/.test(h)) return true;
    // IPv4-mapped (::ffff:a.b.c.d, or as the URL parser writes it, ::ffff:XXXX:XXXX): the v4 rules, conservatively all.
    if (h.startsWith('::ffff:')) return true;
  }
  return false;
}

/** The binding a `service://BINDING/path` target names, or null for any other URL. */
export function serviceOf(url: string): { binding: string; path: string } | null {
  const m = /^service:\/\/([A-Za-z_][A-Za-z0-9_]*)(\/[^#]*)?$/.exec(url);
  return m ? { binding: m[1]!, path: m[2] ?? '/' } : null;
}

/**
 * A push target from a settings request, checked: the URL, its concurrency and timeout (defaults
 * filled in). `services`: the service bindings this plane may push to (PUSH_SERVICES), as
 * `service://BINDING/path`: a Worker of the same account, reached without the public internet.
 */
export function pushInput(
  p: unknown,
  hosts: PushHosts,
  services: readonly string[] = [],
): { url: string; concurrency: number; timeoutMs: number; batchSize: number; rotate: boolean } {
  if (typeof p !== 'object' || p === null || Array.isArray(p))
    throw badRequest('push must be an object {url, concurrency, timeout_ms, batch_size} or null');
  const o = p as Record<string, unknown>;
  for (const k of Object.keys(o))
    if (!['url', 'concurrency', 'timeoutMs', 'batchSize', 'rotateSecret'].includes(k))
      throw badRequest(`unknown push setting ${JSON.stringify(k.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`))}`);
  if (typeof o.url !== 'string' || !o.url) throw badRequest('push.url must be a URL');
  if (o.url.length > 2048) throw badRequest('push.url must be at most 2048 characters');
  let u: URL;
  try {
    u = new URL(o.url);
  } catch {
    throw badRequest(`push.url ${JSON.stringify(o.url)} is not a URL`);
  }
  if (u.username || u.password) throw badRequest('push.url must not carry credentials: the receiver checks the signature instead');
  const loop = LOOPBACK.test(u.hostname);
  if (u.protocol === 'service:') {
    const s = serviceOf(o.url);
    if (!s || !services.includes(s.binding))
      throw badRequest(
        services.length
          ? `push.url must be https://, or service://BINDING/path naming a service binding this plane may push to (PUSH_SERVICES: ${services.join(', ')})`
          : 'push.url must be https://',
      );
  } else if (u.protocol === 'http:') {
    if (!loop) throw badRequest('push.url must be https:// (http:// only on loopback, for a plane on this machine)');
    if (hosts !== 'local')
      throw badRequest('push.url on loopback is for a plane on this machine: a deployed plane pushes to https:// hosts');
  } else if (u.protocol !== 'https:') throw badRequest('push.url must be https://');
  if (hosts === 'public' && u.protocol !== 'service:' && privateHost(u.hostname))
    throw badRequest(`push.url host ${u.hostname} is a private, loopback or link-local address: a deployed plane pushes to public hosts`);
  const concurrency = o.concurrency ?? DEFAULT_PUSH_CONCURRENCY;
  if (typeof concurrency !== 'number' || !Number.isInteger(concurrency) || concurrency < 1 || concurrency > MAX_PUSH_CONCURRENCY)
    throw badRequest(`push.concurrency must be an integer from 1 to ${MAX_PUSH_CONCURRENCY}`);
  const timeoutMs = o.timeoutMs ?? DEFAULT_PUSH_TIMEOUT_MS;
  if (typeof timeoutMs !== 'number' || !Number.isInteger(timeoutMs) || timeoutMs < 100 || timeoutMs > MAX_PUSH_TIMEOUT_MS)
    throw badRequest(`push.timeout_ms must be an integer from 100 to ${MAX_PUSH_TIMEOUT_MS}`);
  const batchSize = o.batchSize ?? DEFAULT_PUSH_BATCH_SIZE;
  if (typeof batchSize !== 'number' || !Number.isInteger(batchSize) || batchSize < 1 || batchSize > MAX_PUSH_BATCH_SIZE)
    throw badRequest(`push.batch_size must be an integer from 1 to ${MAX_PUSH_BATCH_SIZE}`);
  if (o.rotateSecret !== undefined && typeof o.rotateSecret !== 'boolean') throw badRequest('push.rotate_secret must be true or false');
  return { url: o.url, concurrency, timeoutMs, batchSize, rotate: o.rotateSecret === true };
}

const b64 = (bytes: Uint8Array) => btoa(String.fromCharCode(...bytes));

/** A new signing secret: `whsec_` and 32 random bytes in base64, as Standard Webhooks writes them. */
export function newPushSecret(): string {
  return `whsec_${b64(crypto.getRandomValues(new Uint8Array(32)))}`;
}

function secretKey(secret: string): Uint8Array<ArrayBuffer> {
  const s = secret.startsWith('whsec_') ? secret.slice(6) : secret;
  return Uint8Array.from(atob(s), (c) => c.charCodeAt(0));
}

const keys = new Map<string, Promise<CryptoKey>>();

function hmacKey(secret: string): Promise<CryptoKey> {
  let k = keys.get(secret);
  if (!k) {
    if (keys.size > 256) keys.clear();
    k = crypto.subtle.importKey('raw', secretKey(secret), { name: 'HMAC', hash: 'SHA-256' }, false, ['sign']);
    keys.set(secret, k);
  }
  return k;
}

/**
 * The `webhook-signature` header of a delivery: `v1,<base64 HMAC-SHA256 of "id.timestamp.body">`
 * for each secret, space-separated (both while a rotated secret is still honoured).
 */
export async function signDelivery(secrets: string[], id: string, timestampS: number, body: string): Promise<string> {
  const data = new TextEncoder().encode(`${id}.${timestampS}.${body}`);
  const sigs = await Promise.all(
    secrets.map(async (s) => `v1,${b64(new Uint8Array(await crypto.subtle.sign('HMAC', await hmacKey(s), data)))}`),
  );
  return sigs.join(' ');
}
