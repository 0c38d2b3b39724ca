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

/** `ns`: the route's namespace, set once the caller may act in it (auth.ts `may`). */
export type App = { Bindings: Env; Variables: { principal: Principal; ns: string } };
export type Ctx = Context<App>;

export function queueObject(c: Ctx, ns: string, queue: string): DurableObjectStub<QueueObject> {
  return (c.env.QUEUE as unknown as DurableObjectNamespace<QueueObject>).getByName(queueObjectName(ns, queue));
}

/** An engine over the namespace's shard for reads that need no serialization (get, count, a journal page). */
export async function reader(c: Ctx, ns: string): Promise<Engine> {
  const s = settingsFrom(c.env);
  const p = await placementOf(c.env, ns, s.storage.limitBytes);
  return new Engine(new D1Port(p.db), { limits: s.limits, storage: { ...s.storage, shard: p.shard } });
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
export async function liveOverview(c: Ctx, ns: string): Promise<QueueMetrics[]> {
  const overview = await (await reader(c, ns)).overview(ns);
  return Promise.all(
    overview.map(async (o) => {
      const { since, counts, recent, pushing } = await queueObject(c, ns, o.queue).counters();
      return { overview: { ...o, recent, pushing }, counters: { since, counts } };
    }),
  );
}
