/**
 * The producer's API: submit a function call by name, then await its result or stream its values.
 *
 * @example
 * const q = new Queue('gpu');
 * const h = await q.submit('train', { epochs: 3 });
 * for await (const loss of h.stream()) console.log(loss);
 * console.log(await h.result());
 */
import { FrameKind } from '../src/core/frame.ts';
import { decodeEnvelope, encodeEnvelope, fromJsonBytes, newTraceparent } from './envelope.ts';
import { enqueueSpan } from './tracing.ts';
import { jobOrNull, originOf } from './worker/context.ts';
import { defaultDispatch } from './default.ts';
import type { DispatchPlane, Schedule } from './types.ts';
import type { Invocation } from '../src/core/types.ts';
import { jobId } from './ids.ts';
import { checkOptions } from './check-options.ts';

export interface SubmitCallOptions {
  id?: string;
  key?: string;
  priority?: number;
  kwargs?: Record<string, unknown>;
  module?: string;
  timeLimitMs?: number;
  maxRetries?: number;
  traceparent?: string;
  /** The submitting invocation; inside a running job it is that job unless given. */
  parent?: string;
  /** The application's own correlation string, carried in the envelope (runWorker's onDone sees it). */
  origin?: string;
  /**
   * Code transport (docs/code-mount.md): 'push' pushes this process's git tree (pushCode, once per
   * tree) and sends its stamp, so a worker that mounts pushed code imports `module` from exactly
   * that tree; a stamp sends that one. Off by default: it uploads your source tree to the plane,
   * which should be a decision, and workers must opt in to run it.
   */
  code?: 'push' | string;
  /** With code 'push': the directory of the git tree to push (default: this process's). */
  codeDir?: string;
  /** Not claimable for this many ms (delayed until then); or give `runAt`, epoch ms. As the verb's submit. */
  delayMs?: number;
  runAt?: number;
  /** Fails as Expired if not claimed within this many ms; or give `expiresAt`, epoch ms. Default: the queue's TTL. */
  ttlMs?: number;
  expiresAt?: number;
  /** This job's own attempt budget; default: the queue's, else the plane's (3). */
  maxAttempts?: number;
}

/** Every option submitWith takes: a Record of the interface's keys, so the compiler keeps it whole. */
const SUBMIT_CALL: Record<keyof SubmitCallOptions, true> = {
  id: true,
  key: true,
  priority: true,
  kwargs: true,
  module: true,
  timeLimitMs: true,
  maxRetries: true,
  traceparent: true,
  parent: true,
  origin: true,
  code: true,
  codeDir: true,
  delayMs: true,
  runAt: true,
  ttlMs: true,
  expiresAt: true,
  maxAttempts: true,
};

/** The likely meaning of an option submitWith does not take: Python's spellings, mostly. */
const SUBMIT_MEANT: Record<string, keyof SubmitCallOptions> = {
  delay: 'delayMs',
  run_at: 'runAt',
  ttl: 'ttlMs',
  expires_at: 'expiresAt',
  max_attempts: 'maxAttempts',
  max_retries: 'maxRetries',
  retries: 'maxRetries',
  time_limit_ms: 'timeLimitMs',
  timeout: 'timeLimitMs',
  timeoutMs: 'timeLimitMs',
  code_dir: 'codeDir',
};

/** Refuses an option submitWith does not take, as Python's submit_with does: ignored, `delay` would submit at once. */
function checkSubmitCall(opts: unknown): asserts opts is SubmitCallOptions {
  checkOptions('submitWith(options, fn, ...args)', opts, SUBMIT_CALL, SUBMIT_MEANT);
}

/** What a schedule's ticks submit besides the call: scheduleWith's options. */
export interface ScheduleCallOptions {
  /** The IANA time zone the cron expression is read in (default UTC). */
  timezone?: string;
  priority?: number;
  kwargs?: Record<string, unknown>;
  module?: string;
  timeLimitMs?: number;
  maxRetries?: number;
}

const SCHEDULE_CALL: Record<keyof ScheduleCallOptions, true> = {
  timezone: true,
  priority: true,
  kwargs: true,
  module: true,
  timeLimitMs: true,
  maxRetries: true,
};
const SCHEDULE_MEANT: Record<string, keyof ScheduleCallOptions> = {
  tz: 'timezone',
  timeZone: 'timezone',
  time_limit_ms: 'timeLimitMs',
  timeout: 'timeLimitMs',
  max_retries: 'maxRetries',
  retries: 'maxRetries',
};

export class Handle<T = unknown> {
  readonly id: string;
  readonly dispatch: DispatchPlane;
  constructor(id: string, dispatch: DispatchPlane) {
    this.id = id;
    this.dispatch = dispatch;
  }

  /**
   * The decoded return value, waiting as long as the job takes (or `timeoutMs`: then a
   * TimeoutError); throws InvocationFailedError or InvocationCancelledError as the job ended so.
   */
  async result(opts: { timeoutMs?: number } = {}): Promise<T> {
    return fromJsonBytes(await this.dispatch.result(this.id, { timeoutMs: opts.timeoutMs ?? Number.POSITIVE_INFINITY })) as T;
  }

  /**
   * The values the job yields, as it yields them. A retried attempt starts its values over. A job
   * that fails or is cancelled throws as result() does, after its last value: a loop over the
   * stream does not end as if the job went well.
   */
  async *stream<V = unknown>(opts: { timeoutMs?: number; signal?: AbortSignal } = {}): AsyncGenerator<V> {
    let last: number | null = null;
    for await (const f of this.dispatch.journalRead(this.id, opts)) {
      last = f.kind;
      if (f.kind === FrameKind.VALUE) yield fromJsonBytes(f.body) as V;
    }
    // A generator's END says it returned; after anything else, the row says how the job ended.
    if (last !== FrameKind.END && !opts.signal?.aborted)
      await this.dispatch.result(this.id, { timeoutMs: opts.timeoutMs ?? Number.POSITIVE_INFINITY });
  }

  /** The job's row now (state, attempt, error, times), or null once it is deleted. */
  get(): Promise<Invocation | null> {
    return this.dispatch.get(this.id);
  }

  cancel(): Promise<boolean> {
    return this.dispatch.cancel(this.id);
  }
}

/** What an envelope calls `fn`: a worker finds its handler by this name, so it must have one. */
const fnName = (fn: string | ((...a: never[]) => unknown), verb = 'submit'): string => {
  if (typeof fn === 'string') return fn;
  if (typeof fn !== 'function') throw new TypeError(`${verb} needs a function or a function's name, got ${typeof fn}`);
  if (!fn.name)
    throw new TypeError(
      'an anonymous function has no name a worker can find: submit a named one (function f() {} or const f = () => ...), registered by that name on the worker, or the name itself',
    );
  return fn.name;
};

export class Queue {
  readonly name: string;
  readonly dispatch: DispatchPlane;
  constructor(name: string, opts: { dispatch?: DispatchPlane } = {}) {
    this.name = name;
    this.dispatch = opts.dispatch ?? defaultDispatch();
  }

  /** Submits `fn(...args)`; `fn` is a function (its name is sent) or a registered name. */
  submit<T = unknown>(fn: string | ((...a: never[]) => unknown), ...args: unknown[]): Promise<Handle<T>> {
    return this.submitWith<T>({}, fn, ...args);
  }

  /**
   * Submits in a PRODUCER span `enqueue <fn>` (tracing.ts) whose context rides the envelope. Inside
   * a running job, the job is the new one's parent.
   */
  async submitWith<T = unknown>(
    opts: SubmitCallOptions,
    fn: string | ((...a: never[]) => unknown),
    ...args: unknown[]
  ): Promise<Handle<T>> {
    checkSubmitCall(opts);
    const name = fnName(fn);
    // Inside a running job: the job is the new one's parent, and its origin flows on (setOriginFor decides).
    const job = jobOrNull();
    const parent = opts.parent ?? job?.id;
    const origin = opts.origin ?? originOf(job);
    const code = opts.code === 'push' ? await pushed(this.dispatch, opts.codeDir) : (opts.code ?? null);
    return enqueueSpan(name, this.name, async (spanTp) => {
      const envelope = encodeEnvelope({
        fn: name,
        args,
        kwargs: opts.kwargs,
        module: opts.module,
        traceparent: opts.traceparent ?? spanTp ?? newTraceparent(),
        origin,
        time_limit_ms: opts.timeLimitMs,
        max_retries: opts.maxRetries,
        code,
      });
      const id = await this.dispatch.submit(this.name, envelope, {
        id: opts.id ?? jobId(),
        key: opts.key,
        priority: opts.priority,
        parent,
        delayMs: opts.delayMs,
        runAt: opts.runAt,
        ttlMs: opts.ttlMs,
        expiresAt: opts.expiresAt,
        maxAttempts: opts.maxAttempts,
      });
      return new Handle<T>(id, this.dispatch);
    });
  }

  /**
   * Submits `fn(...args)` for each `args` of `argsList` in few requests (submitMany), not a round
   * trip a job, and answers their handles in order (`await Promise.all((await q.map(f, xs)).map((h) => h.result()))`).
   * Should any job be refused (a full plane, an envelope too large), the first refusal is thrown
   * once all were tried, its `handles` holding each job's Handle, or null where it was refused.
   *
   * @example
   * const runs = await new Queue('gpu').map(train, [[{ lr: 0.1 }], [{ lr: 0.01 }]]);
   */
  async map<T = unknown>(fn: string | ((...a: never[]) => unknown), argsList: unknown[][]): Promise<Handle<T>[]> {
    const name = fnName(fn);
    if (!Array.isArray(argsList) || !argsList.every(Array.isArray))
      throw new TypeError('map(fn, argsList) takes a list of argument lists: [[1, 2], [3, 4]] calls fn(1, 2) and fn(3, 4)');
    if (!argsList.length) return [];
    const job = jobOrNull();
    const origin = originOf(job);
    return enqueueSpan(name, this.name, async (spanTp) => {
      const items = argsList.map((args) => ({
        envelope: encodeEnvelope({ fn: name, args, traceparent: spanTp ?? newTraceparent(), origin }),
        opts: { id: jobId(), parent: job?.id },
      }));
      const answers = await this.dispatch.submitMany(this.name, items);
      const handles = answers.map((a) => ('id' in a ? new Handle<T>(a.id, this.dispatch) : null));
      const refused = answers.find((a): a is { error: Error } => 'error' in a);
      if (refused) throw Object.assign(refused.error, { handles });
      return handles as Handle<T>[];
    });
  }

  /**
   * Sets (or replaces) this queue's cron schedule `name`: each tick of `cron` (5 fields, minute
   * first, or 6, seconds first; contract, "Schedules") submits `fn(...args)`, as submit would.
   *
   * @example
   * await new Queue('reports').scheduleWith({ timezone: 'Europe/Berlin' }, 'nightly', '0 3 * * *', 'report', 'eu');
   */
  schedule(name: string, cron: string, fn: string | ((...a: never[]) => unknown), ...args: unknown[]): Promise<Schedule> {
    return this.scheduleWith({}, name, cron, fn, ...args);
  }

  /** schedule() with options: the cron's `timezone`, the ticks' `priority`, and the envelope's `kwargs`, `module`, `timeLimitMs`, `maxRetries`. */
  async scheduleWith(
    opts: ScheduleCallOptions,
    name: string,
    cron: string,
    fn: string | ((...a: never[]) => unknown),
    ...args: unknown[]
  ): Promise<Schedule> {
    checkOptions('scheduleWith(options, name, cron, fn, ...args)', opts, SCHEDULE_CALL, SCHEDULE_MEANT);
    // No traceparent: each tick is a trace of its own, not a span of whoever set the schedule.
    const envelope = encodeEnvelope({
      fn: fnName(fn, 'schedule'),
      args,
      kwargs: opts.kwargs,
      module: opts.module,
      time_limit_ms: opts.timeLimitMs,
      max_retries: opts.maxRetries,
    });
    return this.dispatch.setSchedule(this.name, name, { cron, timezone: opts.timezone ?? null, envelope, priority: opts.priority ?? 0 });
  }

  /** This queue's schedules, by name; `decodeEnvelope(s.envelope)` is the call each tick submits. */
  schedules(): Promise<Schedule[]> {
    return this.dispatch.listSchedules(this.name);
  }

  /** Removes the schedule `name`; an unknown one is a NotFoundError. */
  unschedule(name: string): Promise<void> {
    return this.dispatch.removeSchedule(this.name, name);
  }
}

/** The stamp of this process's git tree, pushed to the plane if it lacks it (HTTP planes only). */
async function pushed(d: DispatchPlane, cwd?: string): Promise<string> {
  const push = (d as { pushCode?: (o: { cwd?: string }) => Promise<{ stamp: string }> }).pushCode;
  if (typeof push !== 'function')
    throw new Error('code transport needs an HTTP plane (pushCode): a local plane runs the code on this machine already');
  return (await push.call(d, { cwd })).stamp;
}

/** Where each function runs: its pool, and how it is treated there. */
export interface Route {
  queue: string;
  priority?: number;
  timeLimitMs?: number;
  maxRetries?: number;
}
export type RouteTable = Record<string, Route>;

/** The pool of a call its route table does not name. */
export const DEFAULT_POOL = 'default';

let configured: RouteTable | null = null;
let fromEnv: { path: string; table: Promise<RouteTable> } | null = null;

/** Sets this process's route table (null: back to LAKESHORE_ROUTES, else none). */
export function setRoutes(routes: RouteTable | null): void {
  configured = routes;
}

/**
 * A route table as a JSON file holds it (both languages read the same file): `{name: {queue,
 * priority?, time_limit_ms?, max_retries?}}`; camelCase keys are taken too.
 */
export function routesOf(json: unknown, where = 'the route table'): RouteTable {
  if (typeof json !== 'object' || json === null || Array.isArray(json)) throw new TypeError(`${where} must be an object of routes by name`);
  const out: RouteTable = {};
  for (const [name, r] of Object.entries(json as Record<string, Record<string, unknown>>)) {
    if (typeof r !== 'object' || r === null || typeof r.queue !== 'string' || !r.queue)
      throw new TypeError(`${where}: the route of ${JSON.stringify(name)} needs a queue`);
    const n = (k: string, c: string) => (typeof (r[k] ?? r[c]) === 'number' ? ((r[k] ?? r[c]) as number) : undefined);
    out[name] = {
      queue: r.queue,
      priority: n('priority', 'priority'),
      timeLimitMs: n('time_limit_ms', 'timeLimitMs'),
      maxRetries: n('max_retries', 'maxRetries'),
    };
  }
  return out;
}

/** The process's routes: setRoutes', else the JSON file LAKESHORE_ROUTES names (read once), else none. */
async function processRoutes(): Promise<RouteTable> {
  if (configured) return configured;
  const path = (globalThis as { process?: { env?: Record<string, string | undefined> } }).process?.env?.LAKESHORE_ROUTES;
  if (!path) return {};
  if (fromEnv?.path !== path) {
    const table = import('node:fs/promises').then(async (fs) =>
      routesOf(JSON.parse(await fs.readFile(path, 'utf8')), `LAKESHORE_ROUTES (${path})`),
    );
    fromEnv = { path, table };
  }
  return fromEnv.table;
}

/**
 * Enqueues a call on the pool its route names, without loading any handler code. `payload` is the
 * call's arguments: an array (args) or an object (kwargs). The routes are `opts.routes`, else the
 * process's (setRoutes, else the JSON file LAKESHORE_ROUTES names); a name no route names goes to
 * the pool `default`, with no options.
 */
export async function dispatchByName<T = unknown>(
  name: string,
  payload: unknown[] | Record<string, unknown>,
  opts: { routes?: RouteTable; dispatch?: DispatchPlane; id?: string; key?: string } = {},
): Promise<Handle<T>> {
  const routes = opts.routes ?? (await processRoutes());
  const route: Route = Object.hasOwn(routes, name) ? routes[name]! : { queue: DEFAULT_POOL };
  const q = new Queue(route.queue, { dispatch: opts.dispatch });
  return q.submitWith<T>(
    {
      id: opts.id,
      key: opts.key,
      priority: route.priority,
      timeLimitMs: route.timeLimitMs,
      maxRetries: route.maxRetries,
      kwargs: Array.isArray(payload) ? undefined : payload,
    },
    name,
    ...(Array.isArray(payload) ? payload : []),
  );
}

export { decodeEnvelope };
