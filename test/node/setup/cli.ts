/** Runs the `lakeshore` CLI as a user would: separate processes, on a chosen plane. */
import { spawn, type ChildProcess } from 'node:child_process';
import { resolve } from 'node:path';
import { inject } from 'vitest';
import { freshNs } from './client.ts';
import { tempDir } from '../../support/tmp.ts';

const BIN = resolve(import.meta.dirname, '..', '..', '..', 'bin', 'lakeshore.mjs');
export const HANDLERS = resolve(import.meta.dirname, '..', '..', 'fixtures', 'handlers.mjs');

export type PlaneKind = 'local' | 'edge';

/** Environment for one test: a fresh local home, or a fresh namespace on the test's wrangler dev. */
export function planeEnv(kind: PlaneKind): NodeJS.ProcessEnv {
  const base = { ...process.env, LAKESHORE_URL: '', LAKESHORE_TOKEN: '', LAKESHORE_NAMESPACE: freshNs() };
  if (kind === 'local') return { ...base, LAKESHORE_HOME: tempDir('lakeshore-cli-') };
  return { ...base, LAKESHORE_URL: inject('planeUrl'), LAKESHORE_TOKEN: inject('planeToken') };
}

export interface Running {
  child: ChildProcess;
  stdout: () => string;
  stderr: () => string;
  exited: Promise<number | null>;
}

/** Runs the CLI with `args`, in `cwd` when given (a worker started in an empty directory, say). */
/** `group`: in a process group of its own, as a terminal's foreground job, which `process.kill(-pid)` signals whole. */
export function start(args: string[], env: NodeJS.ProcessEnv, cwd?: string, opts: { group?: boolean } = {}): Running {
  const child = spawn(process.execPath, [BIN, ...args], { env, cwd, stdio: ['ignore', 'pipe', 'pipe'], detached: !!opts.group });
  let out = '';
  let err = '';
  child.stdout!.on('data', (d) => (out += d));
  child.stderr!.on('data', (d) => (err += d));
  const exited = new Promise<number | null>((r) => child.on('exit', (code) => r(code)));
  return { child, stdout: () => out, stderr: () => err, exited };
}

export async function cli(
  args: string[],
  env: NodeJS.ProcessEnv,
  cwd?: string,
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const r = start(args, env, cwd);
  const code = await r.exited;
  return { code, stdout: r.stdout(), stderr: r.stderr() };
}

/** Stops a process this test started, by PID. */
export async function stop(r: Running, signal: NodeJS.Signals = 'SIGKILL'): Promise<void> {
  if (r.child.exitCode === null && r.child.signalCode === null) r.child.kill(signal);
  await r.exited;
}
