/** The tokens table: create, list, revoke, and the lookup every request makes. */
import { notFound } from '../errors.ts';
import type { Plan } from '../plan.ts';
import { stmt } from '../port.ts';
import type { Role, TokenLimits } from '../tokens.ts';

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
  id: String(r.id),
  ns: String(r.ns),
  role: r.role as Role,
  pools: typeof r.pools === 'string' ? (JSON.parse(r.pools) as string[]) : null,
  name: (r.name as string | null) ?? null,
  created_at: Number(r.created_at),
  revoked_at: r.revoked_at === null || r.revoked_at === undefined ? null : Number(r.revoked_at),
  limits: typeof r.limits === 'string' ? (JSON.parse(r.limits) as TokenLimits) : null,
});

export const createTokenPlan = (
  now: number,
  ns: string,
  id: string,
  digest: string,
  role: Role,
  pools: string[] | null,
  name: string | null,
  limits: TokenLimits | null = null,
): Plan<TokenInfo> => ({
  stmts: [
    stmt(
      `INSERT INTO tokens (id, ns, role, pools, name, digest, created_at, limits) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
       RETURNING id, ns, role, pools, name, created_at, revoked_at, limits`,
      id,
      ns,
      role,
      pools ? JSON.stringify(pools) : null,
      name,
      digest,
      now,
      limits ? JSON.stringify(limits) : null,
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
