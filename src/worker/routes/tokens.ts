/** Token management: an admin (the root token, or a namespace admin token) creates, lists and revokes tokens. */
import { Hono } from 'hono';
import { z } from 'zod';
import * as v from '../../core/validate.ts';
import { checkRole, createTokenPlan, listTokensPlan, newToken, revokeTokenPlan } from '../../core/tokens.ts';
import { allow } from '../auth.ts';
import { readJson } from '../body.ts';
import { committerRun, limitsOf, nsParam, type App } from '../plane.ts';

const Limit = z.number().int().min(1).max(1_000_000);
const CreateBody = z.strictObject({
  role: z.string(),
  pools: z.array(z.string()).nullish(),
  name: z.string().nullish(),
  /** This token's own limits, below or above the plane's defaults. */
  limits: z.strictObject({ requests_per_second: Limit.optional(), request_burst: Limit.optional(), streams: Limit.optional() }).nullish(),
});

export const tokens = new Hono<App>()
  .post('/', async (c) => {
    const ns = nsParam(c);
    allow(c, ns, 'tokens');
    const b = await readJson(c, CreateBody);
    const role = checkRole(b.role);
    const pools = b.pools ? b.pools.map((p) => v.queue(p, limitsOf(c))) : null;
    const name = v.optionalText('name', b.name, 200);
    const t = await newToken();
    const info = await committerRun(c, createTokenPlan(Date.now(), ns, t.id, t.digest, role, pools, name, b.limits ?? null));
    // The token itself is in this answer and nowhere else: only its digest is stored.
    return c.json({ token: t.token, ...info }, 201);
  })
  .get('/', async (c) => {
    const ns = nsParam(c);
    allow(c, ns, 'tokens');
    return c.json({ tokens: await committerRun(c, listTokensPlan(ns)) });
  })
  .delete('/:id', async (c) => {
    const ns = nsParam(c);
    allow(c, ns, 'tokens');
    const id = v.text('token id', c.req.param('id'), 64);
    return c.json({ revoked: await committerRun(c, revokeTokenPlan(Date.now(), ns, id)) });
  });
