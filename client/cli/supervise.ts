/**
 * `lakeshore worker start|once` with Python: runs `python -m dreamlake.lakeshore.daemon` and looks
 * after it. Flags pass through; a daemon that dies (a crash, a kill) is started again after a
 * backoff (250 ms, doubling to 30 s, back to 250 ms once a daemon has lived a minute); SIGTERM or
 * SIGINT are passed on so the running job finishes and its answer goes out, then the supervisor
 * exits 0 (a daemon still running after the grace period is killed); a second one is passed on
 * too, and the daemon puts its running jobs back in their queues and exits. A daemon that exits 2 (bad
 * flags or setup), 6 (its token refused) or 8 (it gave up on the plane, as --give-up-after told
 * it) is not restarted: its error is the supervisor's. A daemon rides out a plane outage itself.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { delimiter, dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { UsageError } from './usage.ts';

export interface PythonFlags {
  queue?: string[];
  root?: string;
  retries?: string;
  workerId?: string;
  graceMs?: string;
  allowPickled?: boolean;
  runtimePolicy?: string;
  code?: string;
  python?: string;
  giveUpAfter?: string;
  timeLimitMs?: string;
  concurrency?: string;
  leaseMs?: string;
}

export interface PlaneFlags {
  url?: string;
  token?: string;
  namespace?: string;
  /** The local plane's directory (--home): the daemon's, where no URL is given. */
  home?: string;
}

const FIRST_BACKOFF_MS = 250;
const MAX_BACKOFF_MS = 30_000;
const HEALTHY_MS = 60_000;

/** The daemon's argv: the pools, and every flag it shares with the Node worker. */
export function daemonArgs(f: PythonFlags, plane: PlaneFlags, once: boolean): string[] {
  // With no --queue the daemon serves LAKESHORE_POOLS (its environment is this one), else `default`.
  const args = ['-m', 'dreamlake.lakeshore.daemon', ...(f.queue ?? []).flatMap((q) => ['--queue', q])];
  if (f.root) args.push('--root', resolve(f.root));
  if (once) args.push('--once');
  if (plane.url) args.push('--url', plane.url);
  if (plane.namespace) args.push('--namespace', plane.namespace);
  if (!plane.url && plane.home) args.push('--home', resolve(plane.home));
  if (f.retries) args.push('--retries', f.retries);
  if (f.workerId) args.push('--worker-id', f.workerId);
  if (f.allowPickled) args.push('--allow-pickled');
  if (f.runtimePolicy) args.push('--runtime-policy', f.runtimePolicy);
  if (f.code) args.push('--code', f.code);
  if (f.giveUpAfter) args.push('--give-up-after', f.giveUpAfter);
  if (f.timeLimitMs) args.push('--time-limit-ms', f.timeLimitMs);
  if (f.concurrency && f.concurrency !== '1') args.push('--concurrency', f.concurrency);
  if (f.leaseMs) args.push('--lease-ms', f.leaseMs);
  return args;
}

/** Where this lakeshore's Python package is, when it ships one (a checkout, the npm package). */
function pythonPath(env: NodeJS.ProcessEnv): string | undefined {
  const here = dirname(fileURLToPath(import.meta.url));
  const pkg = [join(here, '..', 'python'), join(here, '..', '..', 'client', 'python')].find((p) =>
    existsSync(join(p, 'lakeshore', 'daemon.py')),
  );
  return pkg ? [pkg, env.PYTHONPATH].filter(Boolean).join(delimiter) : env.PYTHONPATH;
}

export async function supervisePython(
  f: PythonFlags,
  plane: PlaneFlags,
  once: boolean,
  env: NodeJS.ProcessEnv = process.env,
): Promise<number> {
  // --exit-with-parent: killed outright (SIGKILL, the OOM killer), this supervisor leaves no
  // Python worker claiming jobs behind it.
  const args = [...daemonArgs(f, plane, once), '--exit-with-parent'];
  const python = f.python ?? env.LAKESHORE_PYTHON ?? 'python3';
  // The token goes by the environment, not argv (a process list shows argv).
  const childEnv = { ...env, PYTHONPATH: pythonPath(env), ...(plane.token ? { LAKESHORE_TOKEN: plane.token } : {}) };
  const grace = f.graceMs ? Number(f.graceMs) : 30_000;
  const log = (m: string) => process.stderr.write(`[lakeshore worker] ${m}\n`);
  let stopping = false;
  let child: ChildProcess | null = null;
  let wake: (() => void) | null = null;
  const onSignal = (sig: NodeJS.Signals) => {
    if (stopping) {
      // Asked again: so is the daemon, which puts its running jobs back in their queues and exits.
      log(`${sig} again: passing it on; the Python worker puts its running jobs back and exits`);
      child?.kill('SIGTERM');
      return;
    }
    stopping = true;
    log(`${sig}: passing it on to the Python worker; waiting up to ${grace} ms for its job`);
    child?.kill('SIGTERM');
    setTimeout(() => child?.kill('SIGKILL'), grace).unref();
    wake?.();
  };
  process.on('SIGTERM', () => onSignal('SIGTERM'));
  process.on('SIGINT', () => onSignal('SIGINT'));
  let backoff = FIRST_BACKOFF_MS;
  for (;;) {
    const started = Date.now();
    // In a process group of its own: a terminal's Ctrl-C, sent to the whole foreground group,
    // reaches the daemon once, through this supervisor, not also directly (two signals: stop now).
    child = spawn(python, args, { env: childEnv, stdio: ['ignore', 'inherit', 'inherit'], detached: true });
    log(`python worker started (pid ${child.pid}): ${python} ${args.join(' ')}`);
    const exit = await new Promise<{ code: number | null; signal: NodeJS.Signals | null; error?: Error }>((r) => {
      child!.once('exit', (code, signal) => r({ code, signal }));
      child!.once('error', (error) => r({ code: null, signal: null, error }));
    });
    if (exit.error) throw new UsageError(`could not start ${python}: ${exit.error.message} (set --python or LAKESHORE_PYTHON)`);
    if (stopping) return 0;
    if (once) return exit.code ?? 1;
    // Not started again: bad flags (2), a refusal of its token (6), or giving up on the plane as told (8).
    if (exit.code === 2 || exit.code === 6 || exit.code === 8) return exit.code;
    if (Date.now() - started >= HEALTHY_MS) backoff = FIRST_BACKOFF_MS;
    log(`python worker ${exit.signal ? `killed by ${exit.signal}` : `exited ${exit.code}`}; starting it again in ${backoff} ms`);
    await new Promise<void>((r) => {
      const t = setTimeout(r, backoff);
      wake = () => {
        clearTimeout(t);
        r();
      };
    });
    wake = null;
    if (stopping) return 0;
    backoff = Math.min(MAX_BACKOFF_MS, backoff * 2);
  }
}
