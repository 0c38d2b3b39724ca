/**
 * Namespace-scoped tokens and what each role may do. A token is `lsk_<id>_<secret>`: the id is
 * its visible prefix and primary key, the secret 256 random bits. Only the SHA-256 of the whole
 * token is stored; digests of equal length are compared in constant time.
 */
import { toHex } from './bytes.ts';
import { badRequest, LakeshoreError, notFound } from './errors.ts';
import type { Plan } from './plan.ts';
import { stmt } from './port.ts';

export const ROLES = Object.freeze(['producer', 'worker', 'admin'] as const);
export type Role = (typeof ROLES)[number];

/** The verbs of the HTTP contract, and the roles allowed each. Admin may do everything. */
export const PERMISSIONS = Object.freeze({
  submit: ['producer'],
  get: ['producer'],
  result: ['producer'],
  cancel: ['producer'],
  count: ['producer'],
  read: ['producer'],
  trim: ['producer'],
  queues: ['producer', 'worker'],
  claim: ['worker'],
  heartbeat: ['worker'],
  ack: ['worker'],
  nack: ['worker'],
  append: ['worker'],
  configure: [],
  tokens: [],
  stats: ['producer', 'worker'],
} satisfies Record<string, Role[]>);
export type Verb = keyof typeof PERMISSIONS;

/** Verbs limited to a worker token's pools when it names some. */
const POOL_VERBS: ReadonlySet<Verb> = new Set<Verb>(['claim', 'heartbeat', 'ack', 'nack', 'append']);

/** A token's own request and stream limits; any left out falls back to the plane's setting. */
export interface TokenLimits {
  requests_per_second?: number;
  request_burst?: number;
  streams?: number;
}

/** Who is calling: the deployment's root token, or a namespace-scoped token. */
export type Principal = { kind: 'root' } | { kind: 'token'; id: string; ns: string; role: Role; pools: string[] | null; limits: TokenLimits | null };

export function authorize(p: Principal, ns: string, verb: Verb, queue?: string): void {
  if (p.kind === 'root') return;
  if (p.ns !== ns) throw new LakeshoreError('forbidden', `token ${p.id} belongs to another namespace`);
  if (p.role === 'admin') return;
  if (!(PERMISSIONS[verb] as readonly Role[]).includes(p.role)) throw new LakeshoreError('forbidden', `a ${p.role} token may not ${verb}`);
  if (queue !== undefined && p.pools && POOL_VERBS.has(verb) && !p.pools.includes(queue)) {
    throw new LakeshoreError('forbidden', `token ${p.id} may not ${verb} on pool ${JSON.stringify(queue)}`);
  }
}

const TOKEN = /^lsk_([a-z0-9]{16})_([A-Za-z0-9_-]{43})$/;

export async function sha256Hex(s: string): Promise<string> {
  return toHex(new Uint8Array(await crypto.subtle.digest('SHA-256', new TextEncoder().encode(s))));
}

/** Compares two equal-length strings without an early exit. */
export function constantTimeEqual(a: string, b: string): boolean {
  if (a.length !== b.length) return false;
  let diff = 0;
  for (let i = 0; i < a.length; i++) diff |= a.charCodeAt(i) ^ b.charCodeAt(i);
  return diff === 0;
}

function base64url(bytes: Uint8Array): string {
  let bin = '';
  for (const b of bytes) bin += String.fromCharCode(b);
  return btoa(bin).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
}

export async function newToken(): Promise<{ id: string; token: string; digest: string }> {
  const id = toHex(crypto.getRandomValues(new Uint8Array(8)));
  const token = `lsk_${id}_${base64url(crypto.getRandomValues(new Uint8Array(32)))}`;
  return { id, token, digest: await sha256Hex(token) };
}

/** The id of a well-formed scoped token, or null. */
export const tokenId = (token: string): string | null => TOKEN.exec(token)?.[1] ?? null;

export interface TokenInfo {
  id: string;
  ns: string;
  role: Role;
  pools: string[] | null;
  name: string | null;
  created_at: number;
  revoked_at: number | null;
  limits: TokenLimits | null;
}

const info = (r: Record<string, unknown>): TokenInfo => ({
  id: String(r.id), ns: String(r.ns), role: r.role as Role, pools: typeof r.pools === 'string' ? (JSON.parse(r.pools) as string[]) : null,
  name: (r.name as string | null) ?? null, created_at: Number(r.created_at), revoked_at: r.revoked_at === null || r.revoked_at === undefined ? null : Number(r.revoked_at),
  limits: typeof r.limits === 'string' ? (JSON.parse(r.limits) as TokenLimits) : null,
});

export function checkRole(v: unknown): Role {
  if (typeof v !== 'string' || !(ROLES as readonly string[]).includes(v)) throw badRequest(`unknown role ${JSON.stringify(v)}: expected producer, worker or admin`);
  return v as Role;
}

export const createTokenPlan = (now: number, ns: string, id: string, digest: string, role: Role, pools: string[] | null, name: string | null, limits: TokenLimits | null = null): Plan<TokenInfo> => ({
  stmts: [
    stmt(
      `INSERT INTO tokens (id, ns, role, pools, name, digest, created_at, limits) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
       RETURNING id, ns, role, pools, name, created_at, revoked_at, limits`,
      id, ns, role, pools ? JSON.stringify(pools) : null, name, digest, now, limits ? JSON.stringify(limits) : null,
    ),
  ],
  done: ([r]) => info(r!.rows[0]!),
});

export const listTokensPlan = (ns: string): Plan<TokenInfo[]> => ({
  stmts: [stmt(`SELECT id, ns, role, pools, name, created_at, revoked_at, limits FROM tokens WHERE ns = ?1 ORDER BY created_at, id`, ns)],
  done: ([r]) => r!.rows.map(info),
});

/** Revokes at once: every later request with the token is refused. False if it was already revoked. */
export const revokeTokenPlan = (now: number, ns: string, id: string): Plan<boolean> => ({
  stmts: [
    stmt(`UPDATE tokens SET revoked_at = ?3 WHERE ns = ?1 AND id = ?2 AND revoked_at IS NULL RETURNING id`, ns, id, now),
    stmt(`SELECT id FROM tokens WHERE ns = ?1 AND id = ?2`, ns, id),
  ],
  done: ([u, s]) => {
    if (!s!.rows.length) throw notFound(`token ${JSON.stringify(id)}`);
    return u!.rows.length > 0;
  },
});

/** The live token with this id, with its digest, for verification. */
export const tokenPlan = (id: string): Plan<(TokenInfo & { digest: string }) | null> => ({
  stmts: [stmt(`SELECT id, ns, role, pools, name, created_at, revoked_at, limits, digest FROM tokens WHERE id = ?1`, id)],
  done: ([r]) => {
    const row = r!.rows[0];
    return row ? { ...info(row), digest: String(row.digest) } : null;
  },
});
