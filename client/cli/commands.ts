/** The CLI's commands, each a function of parsed flags. */
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { pathToFileURL, fileURLToPath } from 'node:url';
import { FrameKind, FRAME_KIND_NAMES } from '../../src/core/frame.ts';
import { STATES } from '../../src/core/states.ts';
import type { JournalFrame } from '../../src/core/types.ts';
import { decodeEnvelope, encodeEnvelope, fromJsonBytes, newTraceparent } from '../envelope.ts';
import { InvocationCancelledError, InvocationFailedError, NotFoundError, TimeoutError } from '../errors.ts';
import type { DispatchPlane } from '../types.ts';
import { pushLines } from './push-view.ts';
import { HttpDispatch } from '../http/dispatch.ts';
import { runWorker } from '../worker/run-worker.ts';
import type { Registry } from '../worker/resolve.ts';
import { elapsed, EXIT, type Out } from './output.ts';
import { quietQueue, quietQueueMs } from './watch.ts';

const parseJson = (what: string, s: string | undefined, dflt: unknown) => {
  if (s === undefined) return dflt;
  try {
    return JSON.parse(s);
  } catch {
    throw new UsageError(`${what} is not valid JSON: ${s}`);
  }
};

export class UsageError extends Error {}

export async function submit(
  d: DispatchPlane,
  out: Out,
  queue: string,
  fn: string,
  argsJson: string | undefined,
  f: {
    id?: string;
    key?: string;
    priority?: string;
    kwargs?: string;
    module?: string;
    timeLimitMs?: string;
    maxRetries?: string;
    maxAttempts?: string;
    delayMs?: string;
    ttlMs?: string;
    code?: string;
  },
) {
  const args = parseJson('ARGS', argsJson, []);
  let code: string | null = f.code ?? null;
  if (code === 'push') {
    if (!(d instanceof HttpDispatch))
      throw new UsageError("--code push needs the edge plane (--url): a local plane runs this machine's code already");
    code = (await d.pushCode()).stamp; // this directory's git tree, uploaded once per tree
  }
  const list = Array.isArray(args) ? args : [args];
  const kwargs = parseJson('--kwargs', f.kwargs, {});
  const envelope = encodeEnvelope({
    fn,
    args: list,
    kwargs,
    module: f.module ?? null,
    traceparent: newTraceparent(),
    time_limit_ms: f.timeLimitMs ? Number(f.timeLimitMs) : null,
    max_retries: f.maxRetries ? Number(f.maxRetries) : null,
    code,
  });
  const n = (v: string | undefined) => (v === undefined ? undefined : Number(v));
  const id = await d.submit(queue, envelope, {
    id: f.id ?? crypto.randomUUID(),
    key: f.key,
    priority: n(f.priority),
    maxAttempts: n(f.maxAttempts),
    delayMs: n(f.delayMs),
    ttlMs: n(f.ttlMs),
  });
  out.print({ id, queue, fn }, id);
  return EXIT.ok;
}

export async function get(d: DispatchPlane, out: Out, id: string) {
  const inv = await d.get(id);
  if (!inv) throw new NotFoundError(`invocation ${id} not found`);
  let call: unknown = null;
  try {
    call = decodeEnvelope(inv.envelope);
  } catch {
    call = null;
  }
  const view = {
    id: inv.id,
    queue: inv.queue,
    state: inv.state,
    attempt: inv.attempt,
    priority: inv.priority,
    key: inv.key,
    parent: inv.parent,
    worker_id: inv.workerId,
    lease_until: inv.leaseUntil,
    call,
    result: safeJson(inv.result),
    error: inv.error,
    created_at: inv.createdAt,
    started_at: inv.startedAt,
    finished_at: inv.finishedAt,
    run_at: inv.runAt,
    expires_at: inv.expiresAt,
    max_attempts: inv.maxAttempts,
  };
  // Text shows moments as ISO times (JSON keeps epoch ms).
  const moments = new Set(['lease_until', 'created_at', 'started_at', 'finished_at', 'run_at', 'expires_at']);
  const text = (k: string, v: unknown) =>
    moments.has(k) ? new Date(Number(v)).toISOString() : typeof v === 'object' ? JSON.stringify(v) : String(v);
  out.print(
    view,
    Object.entries(view)
      .filter(([, v]) => v !== null)
      .map(([k, v]) => `${k.padEnd(12)} ${text(k, v)}`)
      .join('\n'),
  );
  return EXIT.ok;
}

const safeJson = (b: Uint8Array | null) => {
  if (b === null) return null;
  try {
    return fromJsonBytes(b);
  } catch {
    return { bytes: b.length };
  }
};

/** Waits for the result. On a TTY a status line shows the elapsed time and the state. */
export async function result(d: DispatchPlane, out: Out, id: string, timeoutS: number, env: NodeJS.ProcessEnv = process.env) {
  const t0 = Date.now();
  const deadline = timeoutS > 0 ? t0 + timeoutS * 1000 : Infinity;
  const quietMs = quietQueueMs(env);
  const quiet = quietQueue(d, id, quietMs);
  try {
    await quiet(); // the quiet span starts now
    for (;;) {
      // Waits in slices: a status line each second on a terminal, and a look at the queue each quiet span.
      const slice = out.tty ? 1_000 : Math.min(deadline - Date.now(), 300_000, quietMs / 2);
      try {
        const bytes = await d.result(id, { timeoutMs: Math.max(0, Math.min(slice, deadline - Date.now())) });
        out.print({ id, state: 'succeeded', result: safeJson(bytes) }, JSON.stringify(safeJson(bytes)));
        return EXIT.ok;
      } catch (e) {
        if (!(e instanceof TimeoutError) || Date.now() >= deadline) throw e;
        const said = await quiet();
        if (said) {
          out.clearStatus();
          process.stderr.write(`lakeshore: ${said}\n`);
        }
        if (out.tty) {
          const inv = await d.get(id);
          out.status(`waiting for ${id}: ${inv?.state ?? '?'} (attempt ${inv?.attempt ?? 0}), ${elapsed(t0)}`);
        }
      }
    }
  } catch (e) {
    return reportEnd(out, id, e);
  }
}

function reportEnd(out: Out, id: string, e: unknown): number {
  if (e instanceof InvocationFailedError) {
    out.print({ id, state: 'failed', error: e.error }, `failed: ${e.error.type ? `${e.error.type}: ` : ''}${e.error.message}`);
    return EXIT.failed;
  }
  if (e instanceof InvocationCancelledError) {
    out.print({ id, state: 'cancelled' }, 'cancelled');
    return EXIT.cancelled;
  }
  if (e instanceof TimeoutError) {
    out.print({ id, timed_out: true }, `timed out: ${e.message}`);
    return EXIT.timeout;
  }
  throw e;
}

/** Prints frames as they are written; the client reconnects from its cursor by itself. */
export async function tail(d: DispatchPlane, out: Out, id: string, since: number) {
  const t0 = Date.now();
  let attempt = 0;
  const show = (f: JournalFrame) => {
    if (out.json)
      return out.print({
        seq: f.seq,
        kind: FRAME_KIND_NAMES[f.kind],
        attempt: f.attempt,
        body: renderBody(f),
        meta: f.meta,
        final: f.final,
      });
    if (f.attempt !== attempt) {
      attempt = f.attempt;
      if (f.kind !== FrameKind.BEGIN) out.print(`── attempt ${f.attempt} ──`);
    }
    if (f.kind === FrameKind.BEGIN) out.print(`── attempt ${f.attempt} ──`);
    else if (f.kind === FrameKind.END) out.print('── end ──');
    else if (f.kind === FrameKind.ERROR) {
      const e = renderBody(f) as { message?: string; type?: string } | string;
      out.print(`!! ${typeof e === 'object' && e ? `${e.type ?? 'Error'}: ${e.message}` : String(e)}`);
    } else if (f.kind === FrameKind.CHUNK) out.print(new TextDecoder().decode(f.body));
    else out.print(JSON.stringify(renderBody(f)));
  };
  let state = '…';
  const ticker = out.tty
    ? setInterval(() => {
        out.status(`tailing ${id}: ${state}, ${elapsed(t0)}`);
        void d
          .get(id)
          .then((inv) => {
            if (inv) state = `${inv.state} (attempt ${inv.attempt})`;
          })
          .catch(() => {});
      }, 1_000)
    : undefined;
  try {
    for await (const f of d.journalRead(id, { since })) {
      out.clearStatus();
      show(f);
    }
  } finally {
    clearInterval(ticker);
    out.clearStatus();
  }
  // The stream can end at a final frame a moment before the worker's ack lands: give it a moment.
  await d.result(id, { timeoutMs: 2_000 }).catch(() => null);
  const inv = await d.get(id);
  if (!out.json) out.print(`${id}: ${inv?.state ?? 'unknown'}`);
  return inv?.state === 'succeeded' || inv?.state === 'running' || inv?.state === 'queued'
    ? EXIT.ok
    : inv?.state === 'cancelled'
      ? EXIT.cancelled
      : EXIT.failed;
}

const renderBody = (f: JournalFrame) => {
  if (f.kind === FrameKind.CHUNK) return new TextDecoder().decode(f.body);
  return safeJson(f.body);
};

export async function cancel(d: DispatchPlane, out: Out, id: string) {
  const cancelled = await d.cancel(id);
  out.print({ id, cancelled }, cancelled ? `${id}: cancelled` : `${id}: already ended, nothing to cancel`);
  return EXIT.ok;
}

/** Bytes for people: 312 KB, 9.0 GB (powers of 1,000, as D1 states its 10 GB). */
export const sizeOf = (n: number) => {
  const units = ['B', 'KB', 'MB', 'GB', 'TB'];
  let i = 0;
  while (n >= 1000 && i < units.length - 1) {
    n /= 1000;
    i++;
  }
  return `${i === 0 ? n : n.toFixed(n >= 100 ? 0 : 1)} ${units[i]}`;
};

export async function stats(d: DispatchPlane, out: Out, queues: string[], watch: boolean, intervalS: number) {
  const once = async () => {
    const names = queues.length ? queues : await d.listQueues();
    const rows = await Promise.all(
      names.map(async (q) => ({
        queue: q,
        ...Object.fromEntries(await Promise.all(STATES.map(async (s) => [s, await d.count(q, s)] as const))),
      })),
    );
    return rows as ({ queue: string } & Record<string, number>)[];
  };
  const render = (rows: ({ queue: string } & Record<string, number>)[]) => {
    const head = ['queue', ...STATES];
    const lines = [head, ...rows.map((r) => [r.queue, ...STATES.map((s) => String(r[s]))])];
    const w = head.map((_, i) => Math.max(...lines.map((l) => l[i]!.length)));
    return lines.map((l) => l.map((c, i) => (i ? c.padStart(w[i]!) : c.padEnd(w[i]!))).join('  ')).join('\n');
  };
  /** The namespace's database against its budget, in a line: where it is, how full, and whether submits are refused. */
  const storageLine = async () => {
    const s = await d.storage();
    const where = s.shard === 'local' ? 'the local file' : `shard ${s.shard}`;
    return `storage: ${where} holds ${sizeOf(s.bytes ?? 0)} of ${sizeOf(s.limitBytes)} (submits refused past ${sizeOf(s.highWaterBytes)})${s.full ? ': FULL, submits are refused' : ''}`;
  };
  if (!watch) {
    const rows = await once();
    if (out.json) {
      for (const r of rows) out.print(r);
      out.print({ storage: await d.storage() });
    } else
      out.print(
        `${rows.length ? render(rows) : 'no queues yet'}\n${await storageLine()}${await pushLines(
          d,
          rows.map((r) => r.queue),
        )}`,
      );
    return EXIT.ok;
  }
  const stop = new AbortController();
  process.once('SIGINT', () => stop.abort());
  while (!stop.signal.aborted) {
    const rows = await once();
    if (out.json) out.print({ at: Date.now(), queues: rows, storage: await d.storage() });
    else
      process.stdout.write(
        `${process.stdout.isTTY ? '\x1b[H\x1b[2J' : ''}${new Date().toISOString()}\n${render(rows)}\n${await storageLine()}${await pushLines(
          d,
          rows.map((r) => r.queue),
        )}\n`,
      );
    await new Promise((r) => setTimeout(r, intervalS * 1000));
  }
  return EXIT.ok;
}

export interface WorkerFlags {
  queue?: string[];
  module?: string;
  root?: string;
  concurrency?: string;
  retries?: string;
  allowImport?: boolean;
  code?: 'mount' | 'off';
  leaseMs?: string;
  timeLimitMs?: string;
  graceMs?: string;
  workerId?: string;
  giveUpAfter?: string;
}

/** Loads the registry: every exported function of --module, by its export name. */
async function loadRegistry(module: string | undefined): Promise<Registry> {
  if (!module) return {};
  const mod = (await import(pathToFileURL(resolve(module)).href)) as Record<string, unknown>;
  const reg: Registry = {};
  for (const [name, v] of Object.entries(mod)) if (typeof v === 'function') reg[name] = v as Registry[string];
  if (mod.default && typeof mod.default === 'object') {
    for (const [name, v] of Object.entries(mod.default as Record<string, unknown>))
      if (typeof v === 'function') reg[name] ??= v as Registry[string];
  }
  return reg;
}

export async function worker(d: DispatchPlane, out: Out, f: WorkerFlags, once: boolean, env: NodeJS.ProcessEnv = process.env) {
  const pools = f.queue?.length
    ? f.queue
    : (env.LAKESHORE_POOLS ?? '')
        .split(',')
        .map((s) => s.trim())
        .filter(Boolean);
  // A worker that names no pool serves `default`, the pool an unrouted call goes to.
  if (!pools.length) pools.push('default');
  const registry = await loadRegistry(f.module);
  const stop = new AbortController();
  const onSignal = (sig: string) => {
    if (!stop.signal.aborted) process.stderr.write(`[lakeshore worker] ${sig}: draining\n`);
    stop.abort();
  };
  process.on('SIGTERM', () => onSignal('SIGTERM'));
  process.on('SIGINT', () => onSignal('SIGINT'));
  const log = (m: string) => process.stderr.write(`[lakeshore worker] ${m}\n`);
  // Where this worker finds the functions it runs: named on its start line, not "0 functions".
  const fns = Object.keys(registry).length;
  const from = [
    f.module ? `${fns} function${fns === 1 ? '' : 's'} from ${f.module}` : null,
    f.code === 'mount' ? "the producers' pushed code, mounted by its stamp" : null,
    (f.allowImport ?? d.inProcess === true) ? `the modules jobs name under ${f.root ? resolve(f.root) : process.cwd()}` : null,
  ].filter(Boolean);
  log(
    `serving ${pools.join(', ')}; runs ${from.length ? from.join(', and ') : 'nothing yet: give it --module, --code mount or --allow-import'}`,
  );
  const n = await runWorker(pools, {
    dispatch: d,
    registry,
    root: f.root ? resolve(f.root) : process.cwd(),
    once,
    concurrency: f.concurrency ? Number(f.concurrency) : 1,
    retries: f.retries ? Number(f.retries) : Infinity,
    allowImport: f.allowImport,
    code: f.code,
    leaseMs: f.leaseMs ? Number(f.leaseMs) : undefined,
    timeLimitMs: f.timeLimitMs ? Number(f.timeLimitMs) : undefined,
    graceMs: f.graceMs ? Number(f.graceMs) : undefined,
    workerId: f.workerId,
    stop: stop.signal,
    log,
    onJob: (id, outcome) => (out.json ? out.print({ id, outcome }) : log(`${id}: ${outcome}`)),
  });
  log(`stopped after ${n} job${n === 1 ? '' : 's'}`);
  return EXIT.ok;
}

/** `lakeshore dev`: the local edge plane, as `npm start` runs it. */
export async function dev(args: string[]) {
  const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
  if (!existsSync(join(root, 'scripts', 'run.mjs'))) {
    throw new UsageError('`lakeshore dev` runs in a lakeshore checkout (it is `npm start` there); this lakeshore is the installed client');
  }
  const child = spawn(process.execPath, [join(root, 'scripts', 'run.mjs'), 'dev', ...args], { stdio: 'inherit', cwd: root });
  for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) process.on(sig, () => child.kill(sig));
  return new Promise<number>((r) => child.on('exit', (code) => r(code ?? 0)));
}

/** `lakeshore token create|list|revoke`: needs the edge plane and an admin token. */
/** `lakeshore admin move-namespace NS --to SHARD`: the namespace's rows to another shard (the root token). */
export async function moveNamespace(d: DispatchPlane, out: Out, to: string | undefined) {
  if (!(d instanceof HttpDispatch))
    throw new UsageError("shards are the edge plane's: pass --url (or set LAKESHORE_URL) and the root --token");
  if (!to) throw new UsageError('move-namespace needs --to SHARD (a D1 binding: DB, DB_1, ...)');
  const r = await d.moveNamespace(to);
  out.print(
    r,
    `moved ${r.namespace} from ${r.from} to ${r.to}: ${r.jobs} jobs, ${r.frames} frames, ${r.queues} queues' settings, ${r.schedules} schedules; writes waited ${r.fencedMs} ms`,
  );
  return EXIT.ok;
}

export async function token(
  d: DispatchPlane,
  out: Out,
  action: string,
  arg: string | undefined,
  f: { role?: string; pool?: string[]; name?: string; rps?: string; burst?: string; streams?: string },
) {
  if (!(d instanceof HttpDispatch))
    throw new UsageError('tokens live on the edge plane: pass --url (or set LAKESHORE_URL) and an admin --token');
  if (action === 'create') {
    const role = f.role ?? arg;
    if (role !== 'producer' && role !== 'worker' && role !== 'admin')
      throw new UsageError('token create needs --role producer|worker|admin');
    const limit = (flag: string, v: string | undefined) => {
      if (v === undefined) return undefined;
      const n = Number(v);
      if (!Number.isInteger(n) || n < 1) throw new UsageError(`--${flag} takes a positive integer, got ${JSON.stringify(v)}`);
      return n;
    };
    const limits = {
      requests_per_second: limit('rps', f.rps),
      request_burst: limit('burst', f.burst),
      streams: limit('streams', f.streams),
    };
    const own = Object.values(limits).some((v) => v !== undefined);
    const t = await d.createToken(role, { pools: f.pool, name: f.name, limits: own ? limits : undefined });
    out.print(
      t,
      `${t.token}\n\nid ${t.id}, role ${t.role}${t.pools ? `, pools ${t.pools.join(',')}` : ''}. This is the only time the token is shown.`,
    );
    return EXIT.ok;
  }
  if (action === 'list') {
    const ts = await d.listTokens();
    if (out.json) for (const t of ts) out.print(t);
    else
      out.print(
        ts
          .map(
            (t) =>
              `${t.id}  ${t.role.padEnd(8)}  ${t.revoked_at ? 'revoked' : 'active '}  ${t.pools ? t.pools.join(',') : '*'}  ${t.name ?? ''}`,
          )
          .join('\n') || 'no tokens',
      );
    return EXIT.ok;
  }
  if (action === 'revoke') {
    if (!arg) throw new UsageError('token revoke needs the token id');
    const revoked = await d.revokeToken(arg);
    out.print({ id: arg, revoked }, revoked ? `${arg}: revoked` : `${arg}: was already revoked`);
    return EXIT.ok;
  }
  throw new UsageError(`unknown token action ${JSON.stringify(action)}: create, list or revoke`);
}

/** `lakeshore stream-url <id>`: a stream token's URL, for a browser's EventSource (edge plane). */
export async function streamUrl(d: DispatchPlane, out: Out, id: string, f: { ttl: string; streams?: string }) {
  if (!(d instanceof HttpDispatch))
    throw new UsageError('stream tokens live on the edge plane: pass --url (or set LAKESHORE_URL) and a producer --token');
  const ttl = Number(f.ttl);
  if (!Number.isFinite(ttl) || ttl <= 0) throw new UsageError(`--ttl takes seconds, got ${JSON.stringify(f.ttl)}`);
  const streams = f.streams === undefined ? undefined : Number(f.streams);
  const t = await d.streamToken(id, { ttlMs: Math.round(ttl * 1000), streams });
  out.print(t, t.url);
  return EXIT.ok;
}
