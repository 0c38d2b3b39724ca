/**
 * CORS, for pages on other origins (hono's `cors()`), set by the `CORS_ORIGINS` var: a
 * comma-separated list of origins (`https://app.example.com`), and/or `*`.
 *
 * - A listed origin may call every route (with its token, sent as Authorization).
 * - `*` opens only the read routes a stream token can use (an invocation's row, result and
 *   journal, with GET): a page anywhere may read with a stream token it was given, and nothing else.
 *
 * Preflights are answered before authentication (a browser sends no token with them). Unset, the
 * plane sends no CORS headers and browsers allow same-origin pages only.
 */
import { cors } from 'hono/cors';
import { LakeshoreError } from '../core/errors.ts';
import type { Ctx } from './plane.ts';

interface Policy {
  listed: ReadonlySet<string>;
  any: boolean;
}

const ORIGIN = /^https?:\/\/[^/\s,]+$/;
const READ_ROUTE = /^\/v1\/ns\/[^/]+\/invocations\/[^/]+(\/result|\/journal)?$/;

const policies = new Map<string, Policy>();
function policyOf(raw: string): Policy {
  let p = policies.get(raw);
  if (!p) {
    const entries = raw
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean);
    const bad = entries.find((e) => e !== '*' && !ORIGIN.test(e));
    if (bad !== undefined)
      throw new LakeshoreError('internal', `CORS_ORIGINS: ${JSON.stringify(bad)} is not an origin (scheme://host[:port], no path) or *`);
    p = { listed: new Set(entries.filter((e) => e !== '*')), any: entries.includes('*') };
    if (policies.size >= 16) policies.clear();
    policies.set(raw, p);
  }
  return p;
}

/** The read routes `*` opens: GET (or its preflight) of an invocation, its result or its journal. */
function isOpenRead(c: Ctx): boolean {
  const method = c.req.method === 'OPTIONS' ? (c.req.header('access-control-request-method') ?? '') : c.req.method;
  return (method === 'GET' || method === 'HEAD') && READ_ROUTE.test(new URL(c.req.url).pathname);
}

function allowed(origin: string, c: Ctx): string | null {
  const raw = (c.env as unknown as Record<string, string | undefined>).CORS_ORIGINS ?? '';
  if (!origin || !raw) return null;
  const p = policyOf(raw);
  if (p.listed.has(origin)) return origin;
  if (p.any && isOpenRead(c)) return '*';
  return null;
}

/** hono's cors(): it also sends `Vary: Origin`, so caches keep the answers per origin apart. */
export const corsHeaders = cors({
  origin: (origin, c) => allowed(origin, c as Ctx),
  allowMethods: ['GET', 'HEAD', 'POST', 'PUT', 'DELETE'],
  allowHeaders: ['Authorization', 'Content-Type', 'Last-Event-ID', 'Accept', 'X-Lakeshore-Bookmark'],
  exposeHeaders: ['Retry-After', 'X-Lakeshore-Bookmark'],
  maxAge: 600,
});
