/**
 * The deployment's shards (src/durable/directory.ts), for its operator with the root token:
 * `GET /v1/shards` answers each one's storage against its budget and how many namespaces live on
 * it, and `GET /v1/shards/:shard/namespaces` those namespaces, a page at a time. What an operator
 * needs to see when to add a shard and what to move off a full one (docs/deploy.md, "Sizing").
 */
import { Hono } from 'hono';
import { LakeshoreError } from '../../core/errors.ts';
import { storageStateOf } from '../../core/storage.ts';
import * as v from '../../core/validate.ts';
import { storageJson } from '../../core/wire-json.ts';
import { homeOf, shardBytes, shardsOf } from '../../durable/directory.ts';
import { settingsFrom } from '../../durable/settings.ts';
import { mayAsRoot } from '../auth.ts';
import { numParam } from '../body.ts';
import type { App } from '../plane.ts';

/** Most namespaces a page of one shard's answers (and its default). */
export const MAX_SHARD_NAMESPACES = 1_000;

export const shards = new Hono<App>()
  .get('/', mayAsRoot('shards'), async (c) => {
    const all = shardsOf(c.env);
    const { storage } = settingsFrom(c.env);
    const [sizes, counts] = await Promise.all([
      Promise.all(all.map((s) => shardBytes(s.db))),
      homeOf(c.env).prepare(`SELECT shard, count(*) AS n FROM namespaces GROUP BY shard`).all<{ shard: string; n: number }>(),
    ]);
    const held = new Map(counts.results.map((r) => [r.shard, Number(r.n)]));
    return c.json({
      shards: all.map((s, i) => ({
        ...storageJson(storageStateOf({ ...storage, shard: s.name }, sizes[i]!)),
        namespaces: held.get(s.name) ?? 0,
      })),
    });
  })
  .get('/:shard/namespaces', mayAsRoot('shards'), async (c) => {
    const shard = c.req.param('shard');
    const names = shardsOf(c.env).map((s) => s.name);
    if (!names.includes(shard))
      throw new LakeshoreError('not_found', `no shard ${JSON.stringify(shard)}: the plane has ${names.join(', ')}`);
    const after = c.req.query('after');
    const from = after === undefined || after === '' ? '' : v.namespace(after);
    const size = v.intInRange('limit', numParam(c, 'limit'), MAX_SHARD_NAMESPACES, 1, MAX_SHARD_NAMESPACES);
    const rows = await homeOf(c.env)
      .prepare(`SELECT ns, state, placed_at FROM namespaces WHERE shard = ?1 AND ns > ?2 ORDER BY ns LIMIT ?3`)
      .bind(shard, from, size + 1)
      .all<{ ns: string; state: string; placed_at: number }>();
    const page = rows.results.slice(0, size);
    return c.json({
      namespaces: page.map((r) => ({ namespace: r.ns, state: r.state, placed_at: r.placed_at })),
      next: rows.results.length > size ? page.at(-1)!.ns : null,
    });
  });
