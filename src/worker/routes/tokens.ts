/** Token management: an admin (the root token, or a namespace admin token) creates, lists and revokes tokens. */
import { Hono } from 'hono';
import * as v from '../../core/validate.ts';
import { checkPools, checkRole, newToken } from '../../core/tokens.ts';
import { createTokenPlan, listTokensPlan, revokeTokenPlan } from '../../core/sql/tokens.ts';
import { TokenBody } from '../../core/wire.ts';
import { may } from '../auth.ts';
import { jsonBody } from '../body.ts';
import { homeRun, limitsOf, type App } from '../plane.ts';
import { revokeAtGate } from '../limits.ts';

export const tokens = new Hono<App>()
  .post('/', may('tokens'), jsonBody(TokenBody), async (c) => {
    const b = c.req.valid('json');
    const role = checkRole(b.role);
    const pools = b.pools ? checkPools(role, b.pools).map((p) => v.queue(p, limitsOf(c))) : null;
    const name = v.optionalText('name', b.name, 200);
    const t = await newToken();
    const info = await homeRun(c, createTokenPlan(Date.now(), c.var.ns, t.id, t.digest, role, pools, name, b.limits ?? null));
    // The token itself is in this answer and nowhere else: only its digest is stored.
    return c.json({ token: t.token, ...info }, 201);
  })
  .get('/', may('tokens'), async (c) => c.json({ tokens: await homeRun(c, listTokensPlan(c.var.ns)) }))
  .delete('/:id', may('tokens'), async (c) => {
    const id = v.text('token id', c.req.param('id'), 64);
    const now = Date.now();
    const revoked = await homeRun(c, revokeTokenPlan(now, c.var.ns, id));
    // The row says revoked for isolates that read it from now; the gate tells those that cached it
    // (src/worker/token-cache.ts). This isolate's cache is left to the gate too: one path for all.
    // Told again on a repeat: a gate call that failed the first time is made now.
    await revokeAtGate(c, id, now);
    return c.json({ revoked });
  });
