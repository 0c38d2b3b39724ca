/**
 * Shards and the directory. The plane stores its rows in one or more D1 databases, its shards:
 * the bindings DB (the home database), DB_1, DB_2, ... of wrangler.toml. Each namespace lives on
 * exactly one shard, all its rows there, so per-namespace uniqueness of ids and keys stays one
 * index. The directory (table `namespaces`, in the home database) says which shard; a namespace is
 * placed on its first use, on the shard with the most room. What is not a namespace's data lives
 * in the home database too: the directory itself and the tokens (credentials are checked before
 * the request reaches any shard, and a move does not touch them).
 *
 * Why the home database and not a Durable Object: the directory is read far more than written
 * (a placement per namespace, a switch per move), each isolate keeps what it read for a few
 * seconds (`placementOf`), and a placement is one conditional INSERT that D1 serializes, so two
 * isolates placing one new namespace at once agree without a coordinator.
 */
import type { Placement } from '../core/shards.ts';
import { nearShards, SHARD_BINDING } from '../core/shards.ts';
import { modelled } from './d1-model.ts';
import { settingsFrom } from './settings.ts';

export interface Shard {
  /** Its binding: DB, DB_1, DB_2, ... */
  name: string;
  db: D1Database;
}

const isD1 = (v: unknown): v is D1Database =>
  !!v && typeof (v as D1Database).prepare === 'function' && typeof (v as D1Database).batch === 'function';

/** The plane's shards, from its env: DB first, then DB_1, DB_2, ... in order. */
export function shardsOf(env: Env): Shard[] {
  const all = Object.entries(env as unknown as Record<string, unknown>)
    .filter(([k, v]) => SHARD_BINDING.test(k) && isD1(v))
    .map(([name, db]) => ({ name, db: served(env, name, db as D1Database) }));
  const n = (s: Shard) => (s.name === 'DB' ? 0 : Number(s.name.slice(3)));
  return all.sort((a, b) => n(a) - n(b));
}

export function shardNamed(env: Env, name: string): Shard {
  const db = (env as unknown as Record<string, unknown>)[name];
  if (!SHARD_BINDING.test(name) || !isD1(db))
    throw new Error(
      `no shard ${JSON.stringify(name)}: the plane has ${shardsOf(env)
        .map((s) => s.name)
        .join(', ')}`,
    );
  return { name, db: served(env, name, db) };
}

export const homeOf = (env: Env): D1Database => served(env, 'DB', env.DB);

/** A shard's database as the plane uses it: behind the single-writer model when a benchmark turns it on (d1-model.ts). */
const served = (env: Env, name: string, db: D1Database): D1Database => {
  const s = settingsFrom(env);
  return modelled(db, name, s.simulatedServiceMs, s.countD1Queries);
};

/** A shard's size in bytes, as D1 reports it after a query (`meta.size_after`). */
export async function shardBytes(db: D1Database): Promise<number> {
  const r = await db.prepare('SELECT 1').all();
  return Number((r.meta as { size_after?: number }).size_after ?? 0);
}

const SELECT = `SELECT shard, state, epoch FROM namespaces WHERE ns = ?1`;
const placementFrom = (env: Env, r: Record<string, unknown>): Placement & { db: D1Database } => {
  const shard = shardNamed(env, String(r.shard));
  return { shard: shard.name, db: shard.db, state: r.state === 'moving' ? 'moving' : 'active', epoch: Number(r.epoch) };
};

/**
 * The namespace's placement, placing it now if it has none: on the shard with the most room
 * (sizes read from each shard), fewest namespaces first among shards within a percent of each
 * other. One INSERT OR IGNORE decides when two callers place it at once.
 */
export async function place(env: Env, ns: string, limitBytes: number): Promise<Placement & { db: D1Database }> {
  const home = homeOf(env);
  const found = await home.prepare(SELECT).bind(ns).first<Record<string, unknown>>();
  if (found) return placementFrom(env, found);
  const shards = shardsOf(env);
  const sizes = await Promise.all(shards.map((s) => shardBytes(s.db)));
  const near = nearShards(
    shards.map((s, i) => ({ name: s.name, bytes: sizes[i]! })),
    limitBytes,
  );
  // pickShard's rule, applied by the INSERT itself: the near shard with the fewest namespaces
  // counted as it runs, so placements made at the same moment spread instead of piling up.
  const [, got] = await home.batch([
    home
      .prepare(
        `INSERT OR IGNORE INTO namespaces (ns, shard, state, epoch, placed_at)
         SELECT ?1, j.value, 'active', 0, ?3 FROM json_each(?2) j
          ORDER BY (SELECT count(*) FROM namespaces n WHERE n.shard = j.value), j.key LIMIT 1`,
      )
      .bind(ns, JSON.stringify(near), Date.now()),
    home.prepare(SELECT).bind(ns),
  ]);
  return placementFrom(env, got!.results[0] as Record<string, unknown>);
}

/**
 * A queue object starting: it is recorded as one of its namespace's objects (a move fences every
 * one recorded), then reads its placement. Recorded first, in the same batch: a move that starts
 * after this batch finds it in the list; one that started before has marked the namespace moving.
 */
export async function enter(env: Env, ns: string, queue: string, limitBytes: number): Promise<Placement & { db: D1Database }> {
  const home = homeOf(env);
  const [, got] = await home.batch([
    home.prepare(`INSERT OR IGNORE INTO namespace_queues (ns, queue) VALUES (?1, ?2)`).bind(ns, queue),
    home.prepare(SELECT).bind(ns),
  ]);
  const row = got!.results[0] as Record<string, unknown> | undefined;
  return row ? placementFrom(env, row) : place(env, ns, limitBytes);
}

/** How long an isolate keeps a namespace's placement: a read routed by a stale one reads a shard a move left, whose copy outlives this. */
export const PLACEMENT_TTL_MS = 5_000;
const placements = new Map<string, { p: Promise<Placement & { db: D1Database }>; until: number }>();

/** Forgets what this isolate read of the namespace's placement (it was just moved from here). */
export const forgetPlacement = (ns: string) => placements.delete(ns);

/** The namespace's placement as this isolate last read it (within PLACEMENT_TTL_MS), placing the namespace if new. */
export function placementOf(env: Env, ns: string, limitBytes: number): Promise<Placement & { db: D1Database }> {
  const now = Date.now();
  const hit = placements.get(ns);
  if (hit && hit.until > now) return hit.p;
  if (placements.size >= 10_000) placements.clear();
  const p = place(env, ns, limitBytes);
  placements.set(ns, { p, until: now + PLACEMENT_TTL_MS });
  p.catch(() => placements.delete(ns));
  return p;
}
