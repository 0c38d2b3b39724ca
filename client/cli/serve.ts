/** `lakeshore worker start` for the Node runtime, and `lakeshore dev`: the commands that serve. */
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { DispatchPlane } from '../types.ts';
import { registeredFrom, type Registry } from '../worker/resolve.ts';
import { runWorker } from '../worker/run-worker.ts';
import { loadModule } from '../worker/load-module.ts';
import { EXIT, type Out } from './output.ts';
import { UsageError } from './usage.ts';

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
  const path = resolve(module);
  // A path that is not there is the command line's mistake (exit 2), said with the path it tried.
  if (!existsSync(path)) throw new UsageError(`--module ${module}: no such file (${path})`);
  let mod: Record<string, unknown>;
  try {
    mod = await loadModule(path);
  } catch (e) {
    // A module that does not load says which, and for a syntax error where.
    throw new Error(`--module ${module} could not be loaded: ${(e as Error).message}`);
  }
  const reg: Registry = {};
  for (const [name, v] of Object.entries(mod)) if (typeof v === 'function') reg[name] = v as Registry[string];
  if (mod.default && typeof mod.default === 'object') {
    for (const [name, v] of Object.entries(mod.default as Record<string, unknown>))
      if (typeof v === 'function') reg[name] ??= v as Registry[string];
  }
  registeredFrom(reg, path);
  return reg;
}

/** Whether a worker's plane is away, as its transport last said; `onAway` is told when it goes. */
export interface PlaneWatch {
  away: boolean;
  onAway?: () => void;
}

export async function worker(
  d: DispatchPlane,
  out: Out,
  f: WorkerFlags,
  once: boolean,
  env: NodeJS.ProcessEnv = process.env,
  watch?: PlaneWatch,
) {
  const pools = f.queue?.length
    ? f.queue
    : (env.LAKESHORE_POOLS ?? '')
        .split(',')
        .map((s) => s.trim())
        .filter(Boolean);
  // A worker that names no pool serves `default`, the pool an unrouted call goes to.
  if (!pools.length) pools.push('default');
  const registry = await loadRegistry(f.module);
  // A module that exports no function gives the worker nothing to run (unless jobs bring their own).
  if (f.module && !Object.keys(registry).length && !f.allowImport && f.code !== 'mount')
    throw new UsageError(`--module ${f.module} exports no function: export each handler (export function count(n) { ... })`);
  const stop = new AbortController();
  const stopNow = new AbortController();
  const log = (m: string) => process.stderr.write(`[lakeshore worker] ${m}\n`);
  // Asked to stop while the plane is away (or it goes away while this worker drains), or asked
  // once more after a stop now: it exits now rather than wait for a plane that may not come back.
  // Nothing it held is lost: each such job goes back to its queue when its lease runs out.
  const quit = (why: string) => {
    log(`${why}: exiting now; the jobs it holds go back to their queues as their leases run out`);
    process.exit(EXIT.ok);
  };
  const onSignal = (sig: string) => {
    if (watch?.away) return quit(`${sig} while the plane is away`);
    if (stopNow.signal.aborted) return quit(`${sig} once more`);
    if (stop.signal.aborted) {
      // Asked again: the running jobs are aborted and go back to their queues by their nacks now,
      // not as their leases run out; a plane slow to take them gets 5 s.
      log(`${sig} again: stopping now; the running jobs go back to their queues`);
      stopNow.abort();
      setTimeout(() => quit('the running jobs not back within 5 s'), 5_000).unref();
      return;
    }
    log(`${sig}: draining (${sig} again: put the running jobs back and stop now)`);
    stop.abort();
  };
  if (watch) watch.onAway = () => stop.signal.aborted && quit('the plane went away while stopping');
  process.on('SIGTERM', () => onSignal('SIGTERM'));
  process.on('SIGINT', () => onSignal('SIGINT'));
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
    stopNow: stopNow.signal,
    log,
    onJob: (id, outcome) => (out.json ? out.print({ id, outcome }) : log(`${id}: ${outcome}`)),
  });
  log(`stopped after ${n} job${n === 1 ? '' : 's'}`);
  // Stopped now: its jobs are back in their queues, and a handler that ignored its abort (a timer,
  // a socket) must not hold the process open.
  if (stopNow.signal.aborted) process.exit(EXIT.ok);
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
