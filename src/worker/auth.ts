/**
 * Bearer-token authentication. Every route but /health requires `Authorization: Bearer <token>`.
 * The token is the LAKESHORE_TOKEN secret; digests of equal length are compared in constant time.
 */
import { createMiddleware } from 'hono/factory';
import { LakeshoreError } from '../core/errors.ts';

const enc = new TextEncoder();
const digest = async (s: string) => new Uint8Array(await crypto.subtle.digest('SHA-256', enc.encode(s)));

export const requireToken = createMiddleware<{ Bindings: Env }>(async (c, next) => {
  const secret = (c.env as unknown as Record<string, string | undefined>).LAKESHORE_TOKEN;
  if (!secret) throw new LakeshoreError('internal', 'the plane has no LAKESHORE_TOKEN secret configured');
  const header = c.req.header('authorization') ?? '';
  const m = /^Bearer\s+(\S+)\s*$/i.exec(header);
  if (!m) throw new LakeshoreError('unauthorized', 'missing bearer token: send Authorization: Bearer <token>');
  const [given, want] = await Promise.all([digest(m[1]!), digest(secret)]);
  if (!crypto.subtle.timingSafeEqual(given, want)) throw new LakeshoreError('unauthorized', 'invalid token');
  await next();
});
