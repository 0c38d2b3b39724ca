/**
 * Authentication and authorization. Every route but /health requires a token, as
 * `Authorization: Bearer`. The deployment's LAKESHORE_TOKEN secret is the root token (all
 * namespaces); a scoped token's row is read once per isolate and kept (token-cache.ts), and a
 * revocation reaches every isolate through the token's gate within about a second. A stream token (stream-token.ts) may also come as `?access_token=` on a GET, for
 * a browser's EventSource, which cannot send headers; a full token never may (URLs end up in logs).
 */
import { createMiddleware } from 'hono/factory';
import { LakeshoreError, invocationNotFound } from '../core/errors.ts';
import { homeRun, nsParam, queueParam } from './plane.ts';
import { authorize, authorizeRoot, constantTimeEqual, sha256Hex, tokenId, type Principal, type Verb } from '../core/tokens.ts';
import { tokenPlan } from '../core/sql/tokens.ts';
import type { App, Ctx } from './plane.ts';
import { admit } from './limits.ts';
import { STREAM_TOKEN_PREFIX, streamKeys, verifyStreamToken } from './stream-token.ts';
import { cachedToken, keepToken } from './token-cache.ts';
import { countTokenRead } from '../durable/d1-model.ts';
import { DELIVERY_TOKEN_PREFIX, verifyDeliveryToken } from '../core/delivery-token.ts';

/**
 * SHA-256 of presented tokens, remembered per isolate (a bounded map): a client sends the same
 * token on every request. Only the digest comparison decides; the cache just saves the hashing.
 */
const digests = new Map<string, Promise<string>>();
function digest(token: string): Promise<string> {
  let d = digests.get(token);
  if (!d) {
    if (digests.size >= 1024) digests.clear();
    digests.set(token, (d = sha256Hex(token)));
  }
  return d;
}

const invalid = () => new LakeshoreError('unauthorized', 'invalid or revoked token');

export const authenticate = createMiddleware<App>(async (c, next) => {
  const secret = (c.env as unknown as Record<string, string | undefined>).LAKESHORE_TOKEN;
  if (!secret) throw new LakeshoreError('internal', 'the plane has no LAKESHORE_TOKEN secret configured');
  const header = c.req.header('authorization');
  const query = c.req.query('access_token');
  if (query !== undefined && !query.startsWith(STREAM_TOKEN_PREFIX)) {
    throw new LakeshoreError(
      'unauthorized',
      'only a stream token (lss_...) may come in the query string: URLs end up in logs. Send other tokens as Authorization: Bearer <token>',
    );
  }
  const m = /^Bearer\s+(\S+)\s*$/i.exec(header ?? '');
  if (header === undefined && query !== undefined) return await streamToken(c, query, next);
  if (!m) throw new LakeshoreError('unauthorized', 'missing bearer token: send Authorization: Bearer <token>');
  if (m[1]!.startsWith(STREAM_TOKEN_PREFIX)) return await streamToken(c, m[1]!, next);
  if (m[1]!.startsWith(DELIVERY_TOKEN_PREFIX)) return await deliveryToken(c, m[1]!, next);
  const given = await digest(m[1]!);
  if (constantTimeEqual(given, await digest(secret))) {
    c.set('principal', { kind: 'root' });
    await admit(c, { kind: 'root' });
    return next();
  }
  const id = tokenId(m[1]!);
  if (!id) throw invalid();
  // Read once per isolate (token-cache.ts): a revocation comes back through the token's gate, in admit().
  let k = cachedToken(id);
  if (!k) {
    countTokenRead();
    const t = await homeRun(c, tokenPlan(id));
    if (!t || t.revoked_at !== null) throw invalid();
    k = { principal: { kind: 'token', id: t.id, ns: t.ns, role: t.role, pools: t.pools, limits: t.limits }, digest: t.digest };
    keepToken(id, k);
  }
  if (!constantTimeEqual(given, k.digest)) throw invalid();
  const principal: Principal = k.principal;
  c.set('principal', principal);
  await admit(c, principal);
  return next();
});

/** A stream token: its signature and expiry are the whole check (no D1 read); it only reads. */
async function streamToken(c: Ctx, token: string, next: () => Promise<void>): Promise<void> {
  if (c.req.method !== 'GET' && c.req.method !== 'HEAD')
    throw new LakeshoreError('forbidden', 'a stream token only reads: GET its invocation, result or journal');
  const s = await verifyStreamToken(await streamKeys(c.env), token, Date.now());
  const principal: Principal = { kind: 'stream', jti: s.jti, ns: s.ns, queue: s.queue, id: s.id, streams: s.streams };
  c.set('principal', principal);
  await admit(c, principal);
  return next();
}

/** A delivery token: its signature and expiry are the whole check (no D1 read); its attempt's fence does the rest. */
async function deliveryToken(c: Ctx, token: string, next: () => Promise<void>): Promise<void> {
  const d = await verifyDeliveryToken(await streamKeys(c.env), token, Date.now());
  const principal: Principal = { kind: 'delivery', ns: d.ns, queue: d.queue, id: d.id, attempt: d.attempt, workerId: d.workerId };
  c.set('principal', principal);
  await admit(c, principal);
  return next();
}

/**
 * The holder an ack, nack, heartbeat or append names: the body's, or with a delivery token the
 * token's own attempt (a body naming another is refused).
 */
export function holderOf(c: Ctx, b: { worker_id?: string | null; attempt?: number | null }): { workerId: unknown; attempt: unknown } {
  const p = c.get('principal') as Principal;
  if (p.kind !== 'delivery') return { workerId: b.worker_id, attempt: b.attempt };
  if ((b.worker_id != null && b.worker_id !== p.workerId) || (b.attempt != null && b.attempt !== p.attempt))
    throw new LakeshoreError('forbidden', `a delivery token acts for its own attempt (worker ${p.workerId}, attempt ${p.attempt}) only`);
  return { workerId: p.workerId, attempt: p.attempt };
}

/** Refuses (403) unless the caller's token may do `verb` in `ns` (on `queue`, for pool-limited verbs). */
export function allow(c: Ctx, ns: string, verb: Verb, queue?: string): void {
  authorize(c.get('principal') as Principal, ns, verb, queue);
}

/**
 * A route's authorization, before its body is read: the caller may do `verb` in the route's
 * namespace (and on its `:queue`, for pool-limited verbs). Handlers read the namespace as `c.var.ns`.
 */
export const may = (verb: Verb) =>
  createMiddleware<App>(async (c, next) => {
    const ns = nsParam(c);
    allow(c, ns, verb, c.req.param('queue') === undefined ? undefined : queueParam(c));
    const p = c.get('principal') as Principal;
    // A stream token reads its one invocation; another id answers as if there were nothing there,
    // and a route of many (a wait on many jobs) is not its to call.
    if (p.kind === 'stream' || p.kind === 'delivery') {
      const id = c.req.param('id');
      if (id === undefined) throw new LakeshoreError('forbidden', `a ${p.kind} token acts on its one invocation only`);
      if (id !== p.id) throw invocationNotFound(id);
    }
    c.set('ns', ns);
    await next();
  });

/** A route of the deployment, not of a namespace (its shards): the root token only. */
export const mayAsRoot = (verb: Verb) =>
  createMiddleware<App>(async (c, next) => {
    authorizeRoot(c.get('principal') as Principal, verb);
    await next();
  });
