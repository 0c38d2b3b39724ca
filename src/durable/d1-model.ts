/**
 * A simulation of D1's single writer, for benchmarks only (SIMULATED_D1_SERVICE_MS, default 0:
 * off). Cloudflare documents a D1 database as running one query at a time; the local simulator
 * has no such limit and no service time. With the model on, every database (by its binding) runs
 * one call at a time, and each call holds it for the service time once per statement it carries
 * (a batch of five holds it five times as long as one query), the local call running at the end
 * of its hold. Every D1 call of the plane goes through it: queue objects, the directory, token
 * checks, the Worker's reads, moves. It counts the queries per database, which the bench reads
 * from a queue object's stats (one isolate holds the Worker and its objects locally).
 *
 * This is a model, named as one wherever its numbers appear: it says how the plane behaves when
 * each database is a single writer, not how fast Cloudflare's D1 is.
 *
 * COUNT_D1_QUERIES=1 (benchmarks) counts the queries with no service time: the model's counters,
 * without its waits.
 */

interface Lane {
  /**
   * When the database is next free, as a time: a call reserves its hold from there. Only numbers
   * are shared between calls (a promise made in one request's context must not be awaited by
   * another's in workerd), and each call waits on a timer of its own.
   */
  freeAt: number;
  queries: number;
  calls: number;
  busyMs: number;
}

const lanes = new Map<string, Lane>();

/** Token rows this isolate read from D1 (the benchmark's "token checks": src/worker/token-cache.ts misses). */
let tokenRows = 0;
export const tokenReads = (): number => tokenRows;
export function countTokenRead(): void {
  tokenRows++;
}

/** Queries and calls each modelled database served since the isolate started. */
export const modelCounters = (): Record<string, { queries: number; calls: number; busy_ms: number }> =>
  Object.fromEntries([...lanes].map(([k, l]) => [k, { queries: l.queries, calls: l.calls, busy_ms: Math.round(l.busyMs) }]));

function laneOf(name: string): Lane {
  let l = lanes.get(name);
  if (!l) lanes.set(name, (l = { freeAt: 0, queries: 0, calls: 0, busyMs: 0 }));
  return l;
}

/** Runs `call` as database `name` would: after the calls before it, holding it `statements × serviceMs`. */
async function served<T>(name: string, serviceMs: number, statements: number, call: () => Promise<T>): Promise<T> {
  const lane = laneOf(name);
  const hold = statements * serviceMs;
  const now = performance.now();
  const done = Math.max(now, lane.freeAt) + hold;
  lane.freeAt = done;
  lane.queries += statements;
  lane.calls++;
  lane.busyMs += hold;
  if (hold > 0) await new Promise((r) => setTimeout(r, done - now));
  return call();
}

/** A modelled statement answers this with the real one, which D1's batch needs (it reads its private fields). */
const UNWRAP = Symbol('unwrap');
const unwrap = (s: D1PreparedStatement): D1PreparedStatement => (s as unknown as Record<symbol, D1PreparedStatement>)[UNWRAP] ?? s;

/** `db` behind the model (the binding `name`), or `db` itself when `serviceMs` is 0 and nothing counts. */
export function modelled(db: D1Database, name: string, serviceMs: number, count = false): D1Database {
  if (!(serviceMs > 0) && !count) return db;
  const statement = (s: D1PreparedStatement): D1PreparedStatement =>
    new Proxy(s, {
      get(target, prop, recv) {
        if (prop === UNWRAP) return target;
        if (prop === 'bind') return (...args: unknown[]) => statement(target.bind(...args));
        if (prop === 'all' || prop === 'first' || prop === 'run' || prop === 'raw') {
          const f = Reflect.get(target, prop, recv) as (...a: unknown[]) => Promise<unknown>;
          return (...args: unknown[]) => served(name, serviceMs, 1, () => f.apply(target, args));
        }
        return Reflect.get(target, prop, recv);
      },
    });
  // The binding and its sessions (D1's Sessions API) alike: their prepare and batch go through the model.
  const wrap = <T extends D1Database | D1DatabaseSession>(inner: T): T =>
    new Proxy(inner, {
      get(target, prop, recv) {
        if (prop === 'prepare') return (sql: string) => statement(target.prepare(sql));
        if (prop === 'batch')
          return (stmts: D1PreparedStatement[]) => served(name, serviceMs, stmts.length, () => target.batch(stmts.map(unwrap)));
        if (prop === 'withSession' && 'withSession' in target)
          return (c?: string) => wrap((target as D1Database).withSession(c as D1SessionBookmark));
        const v = Reflect.get(target, prop, recv);
        return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
      },
    });
  return wrap(db);
}
