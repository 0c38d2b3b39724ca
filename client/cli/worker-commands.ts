/** `lakeshore worker start|once`: its flags, and which runtime serves them. */
import { statSync } from 'node:fs';
import { resolve } from 'node:path';
import { type Command, Option } from 'commander';
import { planeFromEnv, type PlaneFlags } from '../default.ts';
import type { DispatchPlane } from '../types.ts';
import { output } from './output.ts';
import { type PlaneWatch, worker as serveNode, type WorkerFlags } from './serve.ts';
import { type PythonFlags, supervisePython } from './supervise.ts';
import { UsageError } from './usage.ts';

/** The CLI's global flags. */
export type Global = PlaneFlags & { json?: boolean };
/** Runs a command's body with the global flags; `plane: false` when it needs no plane of its own. */
export type Run = (fn: (g: Global) => Promise<number>, opts?: { plane?: boolean }) => () => Promise<void>;

/**
 * A long-running worker's plane: it never gives up on the plane (or only after --give-up-after),
 * backs off up to 5 s between tries, and says once when the plane goes away and once when it is back.
 */
const workerPlaneOf = (g: Global, giveUpAfterS: string | undefined, watch: PlaneWatch) => {
  const giveUp = giveUpAfterS === undefined ? Number.POSITIVE_INFINITY : Number(giveUpAfterS) * 1000;
  if (!(giveUp > 0)) throw new UsageError(`--give-up-after takes a number of seconds, got ${JSON.stringify(giveUpAfterS)}`);
  const log = (m: string) => process.stderr.write(`[lakeshore worker] ${m}\n`);
  return planeFromEnv(process.env, {
    ...g,
    retryForMs: giveUp,
    maxBackoffMs: 5_000,
    onOutage: (e) => {
      log(e.away ? `${e.message}; its jobs keep their place` : `the plane is back after ${(e.awayMs / 1000).toFixed(1)} s`);
      watch.away = e.away;
      if (e.away) watch.onAway?.();
    },
  });
};

type WorkerOpts = WorkerFlags & PythonFlags & { runtime?: 'node' | 'python' };
/**
 * Which worker: the one `--runtime` names, else a Node one when its flags give it something to run
 * (--module, --allow-import, --code mount), else a Python one: the reference's `lakeshore worker
 * start --queue gpu --root /data` serves Python functions.
 */
export const runtimeOf = (o: WorkerOpts): 'node' | 'python' =>
  o.runtime ?? (o.module || o.allowImport || o.code === 'mount' ? 'node' : 'python');

/** Adds `worker start` and `worker once` to the program. */
export function workerCommands(program: Command, run: Run, planeOf: (g: Global) => DispatchPlane): void {
  const worker = program.command('worker').description('run a worker');
  const workerOptions = (c: Command) =>
    c
      .addOption(
        new Option('--queue <pool>', 'pool to serve (repeatable; env LAKESHORE_POOLS=a,b)').argParser((v: string, prev: string[] = []) => [
          ...prev,
          v,
        ]),
      )
      .option('--module <file>', 'handlers: every exported function is registered by its name')
      .option('--root <dir>', 'directory that envelope imports resolve under')
      .option('--concurrency <n>', 'jobs at a time', '1')
      .option(
        '--retries <n>',
        "retry a failed job while attempt <= n: n+1 attempts where neither the job nor its queue sets a budget (default: the plane's budget)",
      )
      .option('--allow-import', 'let envelopes name modules to import (code execution; off by default over HTTP)')
      .addOption(
        new Option(
          '--code <mode>',
          "mount: run jobs carrying a producer's pushed code, from their tree (runs the producer's code)",
        ).choices(['mount', 'off']),
      )
      .option('--lease-ms <ms>', 'lease per claim')
      .option('--time-limit-ms <ms>', "a job's time limit where neither its envelope nor its queue sets one (default 600000; 0: none)")
      .option('--grace-ms <ms>', 'on SIGTERM/SIGINT, wait this long for running jobs', '30000')
      .option('--worker-id <id>', 'name this worker (default host:pid:random)')
      .option('--give-up-after <seconds>', 'exit (code 8) once the plane has been unreachable this long (default: never)')
      .addOption(
        new Option(
          '--runtime <runtime>',
          'node: this process runs the jobs; python: run `python -m dreamlake.lakeshore.daemon` and restart it when it dies (default: node when --module, --allow-import or --code mount gives a Node worker something to run, else python)',
        ).choices(['node', 'python']),
      )
      .option('--python <path>', 'the Python interpreter for the python runtime (env LAKESHORE_PYTHON, default python3)')
      .option('--allow-pickled', "python: run by-value (pickled) functions; this runs the sender's code")
      .addOption(
        new Option('--runtime-policy <policy>', "python: how a pickled function's interpreter must match").choices([
          'strict',
          'minor',
          'off',
        ]),
      );
  /** A Node worker in this process, or a supervised Python one. */
  const serve = (o: WorkerOpts, once: boolean) =>
    (runtimeOf(o) === 'python'
      ? run(
          async (g) =>
            rootChecked(o) &&
            supervisePython(
              o,
              {
                url: g.url ?? process.env.LAKESHORE_URL,
                token: g.token ?? process.env.LAKESHORE_TOKEN,
                namespace: g.namespace ?? process.env.LAKESHORE_NAMESPACE,
                home: g.home,
              },
              once,
            ),
          { plane: false },
        )
      : run(async (g) => {
          rootChecked(o);
          const watch: PlaneWatch = { away: false };
          return serveNode(once ? planeOf(g) : workerPlaneOf(g, o.giveUpAfter, watch), output(!!g.json), o, once, process.env, watch);
        }))();
  workerOptions(worker.command('start').description('serve pools until SIGTERM/SIGINT, then drain')).action((o: WorkerOpts) =>
    serve(o, false),
  );
  workerOptions(worker.command('once').description('run one job, then exit (an empty queue: exit 0 after 2 s)')).action((o: WorkerOpts) =>
    serve(o, true),
  );
}

/**
 * A --root that is no directory is the command line's mistake (exit 2), said at once with the path
 * it tried: a worker would otherwise start, claim, and fail every job that names a module.
 */
function rootChecked(o: WorkerOpts): true {
  if (o.root === undefined) return true;
  const path = resolve(o.root);
  if (!statSync(path, { throwIfNoEntry: false })?.isDirectory()) throw new UsageError(`--root ${o.root}: no such directory (${path})`);
  return true;
}
