/**
 * How the Worker reaches the plane: the queue's Durable Object for transitions, the namespace's
 * shard for reads it serves itself (src/durable/directory.ts), the home database for tokens.
 */
import type { Context } from 'hono';
import { Engine } from '../core/engine.ts';
import { invocationNotFound } from '../core/errors.ts';
import * as v from '../core/validate.ts';
import { D1Port } from '../durable/d1-port.ts';
import { homeOf, placementOf } from '../durable/directory.ts';
import { queueObjectName, type QueueObject } from '../durable/queue-object.ts';
import { settingsFrom } from '../durable/settings.ts';
import type { Plan } from '../core/plan.ts';
import type { Limits } from '../core/limits.ts';
import type { QueueMetrics } from '../core/metrics.ts';
import type { Principal } from '../core/tokens.ts';
import { type Bookmark, newer } from '../durable/bookmark.ts';

/**
 * `ns`: the route's namespace, set once the caller may act in it (auth.ts `may`). `given`: the
 * request's bookmark; `seen`: the newest its D1 work answered, and the reads' ports still to ask
 * (bookmarks.ts answers it).
 */
export type App = {
  Bindings: Env;
  Variables: {
    principal: Principal;
    ns: string;
    given: Bookmark | null;
    seen: { newest: Bookmark | null; ports: { shard: string; port: D1Port }[] };
  };
};
export type Ctx = Context<App>;

/** Keeps the newest bookmark an answer of a queue object named (its `bookmark`), for this request's answer. */
export function noteBookmark(c: Ctx, answer: unknown): void {
  const b = (answer as { bookmark?: unknown } | null)?.bookmark;
  if (typeof b !== 'string') return;
  const i = b.indexOf(':');
  const seen = c.get('seen');
  if (i > 0 && seen) seen.newest = newer(seen.newest, { shard: b.slice(0, i), d1: b.slice(i + 1) });
}

/**
 * The queue's object. Each answer's bookmark is kept for this request's answer (a client carries
 * it to read its own writes from a replica): the stub is watched, so no route has to.
 */
export function queueObject(c: Ctx, ns: string, queue: string): DurableObjectStub<QueueObject> {
  const stub = (c.env.QUEUE as unknown as DurableObjectNamespace<QueueObject>).getByName(queueObjectName(ns, queue));
  return new Proxy(stub, {
    get(target, prop) {
      const v = Reflect.get(target, prop) as unknown;
      if (typeof prop === 'symbol' || prop === 'then' || typeof v !== 'function') return v;
      // fetch answers a Response (a stream it relays), not a settled answer: as it is, on its stub.
      if (prop === 'fetch') return (v as (...a: unknown[]) => unknown).bind(target);
      return (...args: unknown[]) => {
        // Reflect.apply: an RPC method is a stub whose own properties (`apply` too) are remote calls.
        const r = Reflect.apply(v as (...a: unknown[]) => unknown, target, args);
        if (!(r instanceof Promise) && typeof (r as { then?: unknown } | null)?.then !== 'function') return r;
        return (r as Promise<unknown>).then((a) => {
          noteBookmark(c, a);
          return a;
        });
      };
    },
  });
}

/**
 * An engine over the namespace's shard for reads that need no serialization (get, count, a
 * journal page, a listing, the overview). They run in one D1 session: from the request's bookmark
 * when it names this shard (a replica at least that new may serve them), else on the primary.
 */
export async function reader(c: Ctx, ns: string): Promise<Engine> {
  const s = settingsFrom(c.env);
  const p = await placementOf(c.env, ns, s.storage.limitBytes);
  const given = c.get('given');
  const port = new D1Port(p.db, { session: given && given.shard === p.shard ? given.d1 : 'first-primary' });
  c.get('seen')?.ports.push({ shard: p.shard, port });
  return new Engine(port, { limits: s.limits, storage: { ...s.storage, shard: p.shard } });
}

/** An engine over the home database: tokens (directory.ts says why they live there). */
const home = (c: Ctx) => new Engine(new D1Port(homeOf(c.env)), { limits: settingsFrom(c.env).limits });

/** The plane's limits (defaults with the LIMIT_* vars applied), parsed once per isolate. */
export const limitsOf = (c: Ctx): Limits => settingsFrom(c.env).resolved;

export const nsParam = (c: Ctx) => v.namespace(c.req.param('ns'));
export const queueParam = (c: Ctx) => v.queue(c.req.param('queue'), limitsOf(c));
export const idParam = (c: Ctx) => v.id(c.req.param('id'), limitsOf(c));

/** The caller's `?queue=` hint, checked; null when it gave none. A stream or delivery token carries its queue. */
export const hint = (c: Ctx): string | null => {
  const p = c.get('principal');
  if (p?.kind === 'stream' || p?.kind === 'delivery') return p.queue;
  const q = c.req.query('queue');
  return q ? v.queue(q, limitsOf(c)) : null;
};

/**
 * The queue an invocation lives in, so the request can go to that queue's object. Clients that
 * know it (from submit or claim) pass `?queue=` and save the lookup; a wrong hint finds nothing.
 */
export async function locate(c: Ctx, ns: string, id: string): Promise<string> {
  const q = hint(c);
  if (q) return q;
  const queue = await (await reader(c, ns)).queueOf(ns, id);
  if (queue === null) throw invocationNotFound(id);
  return queue;
}

/** Runs a plan on the home database (token lookups and management need no queue object). */
export const homeRun = <T>(c: Ctx, plan: Plan<T>): Promise<T> => home(c).committer.run(plan);

/**
 * Each queue's overview (rows, read from D1 here) with what its queue object keeps in memory: the
 * transition counters and the jobs finished lately (the object runs the transitions; this isolate does not).
 */
export async function liveOverview(c: Ctx, ns: string, queues: string[]): Promise<QueueMetrics[]> {
  if (!queues.length) return [];
  const overview = await (await reader(c, ns)).overview(ns, queues);
  return Promise.all(
    overview.map(async (o) => {
      const { since, counts, recent, pushing } = await queueObject(c, ns, o.queue).counters();
      return { overview: { ...o, recent, pushing }, counters: { since, counts } };
    }),
  );
}
