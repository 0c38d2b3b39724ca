/**
 * Finds the function an envelope names: the registry first; otherwise, only when allowed, an
 * import of `module#export` resolved under `root` (never outside it). Payloads are data: nothing
 * is eval'ed, and an import is code execution, so it is off unless the operator turns it on.
 */
import type { Envelope } from '../envelope.ts';
import type { Mounts } from './mount.ts';
import { changedSinceLoaded, loadModule, ModuleLoadError } from './load-module.ts';

// biome-ignore lint/suspicious/noExplicitAny: a handler takes whatever arguments its jobs carry; unknown[] would refuse every typed handler
export type Handler = (...args: any[]) => unknown;
export type Registry = Record<string, Handler>;

export class ResolveError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ResolveError';
  }
}

type ResolveOptions = { registry: Registry; root: string; allowImport: boolean; mounts?: Mounts | null };

/** The module file each registry holds the functions of (the CLI's --module): see `registeredFrom`. */
const origins = new WeakMap<Registry, string>();

/**
 * Says that `registry` holds the functions `file` exported (loaded with loadModule): a function it
 * lacks that the file gained since is then told so (a worker runs what it loaded, not the file).
 */
export function registeredFrom(registry: Registry, file: string): void {
  origins.set(registry, file);
}

/**
 * The handler itself when the registry has it (no promise: a worker resolves one a job), else a
 * promise of the import's. Throws (or rejects with) ResolveError when it cannot be found.
 */
export function resolveHandler(env: Envelope, opts: ResolveOptions): Handler | Promise<Handler> {
  if (!env.code) {
    const own = Object.hasOwn(opts.registry, env.fn) ? opts.registry[env.fn] : undefined;
    if (typeof own === 'function') return own;
  }
  return resolveElsewhere(env, opts);
}

async function resolveElsewhere(env: Envelope, opts: ResolveOptions): Promise<Handler> {
  // Pushed code (docs/code-mount.md): the module comes from the producer's tree, never from the registry.
  if (env.code) {
    if (!opts.mounts) {
      throw new ResolveError(
        `this job runs the producer's pushed code (stamp ${env.code}), and this worker does not run pushed code: start it with runWorker(queues, { code: 'mount' }) (--code mount) to allow it; that runs the producer's code`,
      );
    }
    if (!env.module) throw new ResolveError(`a job with pushed code names its module (path#export); ${JSON.stringify(env.fn)} names none`);
    let root: string;
    try {
      root = await opts.mounts.mount(env.code);
    } catch (e) {
      throw new ResolveError(`the pushed code ${env.code} could not be mounted: ${(e as Error).message}`);
    }
    return resolveHandler({ ...env, code: null }, { registry: {}, root, allowImport: true });
  }
  const own = Object.hasOwn(opts.registry, env.fn) ? opts.registry[env.fn] : undefined;
  if (typeof own === 'function') return own;
  if (!env.module) {
    const near = nearest(env.fn, Object.keys(opts.registry));
    throw new ResolveError(
      `function ${JSON.stringify(env.fn)} is not registered with this worker${near ? ` (it has ${JSON.stringify(near)}, perhaps)` : ''}, and the job names no module to import it from (register it: --module, registry; or submit it with one: --module PATH#EXPORT)${await registryChanged(opts.registry)}`,
    );
  }
  if (!opts.allowImport) {
    throw new ResolveError(
      `function ${JSON.stringify(env.fn)} is not registered, and importing ${JSON.stringify(env.module)} is off: start the worker with allowImport (--allow-import) to let envelopes name modules`,
    );
  }
  // Node's path module, loaded only here: a worker that never imports needs none.
  const { isAbsolute, relative, resolve } = await import('node:path');
  const [path, exportName = env.fn] = env.module.split('#');
  const file = resolve(opts.root, path!);
  const rel = relative(opts.root, file);
  if (rel.startsWith('..') || isAbsolute(rel)) throw new ResolveError(`module ${JSON.stringify(env.module)} is outside the worker's root`);
  let mod: Record<string, unknown>;
  try {
    mod = await loadModule(file);
  } catch (e) {
    // A file that is not there or does not compile fails the same at every attempt: said once,
    // where, and not retried. Anything else its top level throws may pass, and is the handler's.
    const failure = e instanceof ModuleLoadError ? e.failure : (e as Error);
    if (failure.name !== 'SyntaxError' && (failure as { code?: string }).code !== 'ERR_MODULE_NOT_FOUND') throw failure;
    throw new ResolveError(`could not import ${JSON.stringify(path)} under ${opts.root}: ${(e as Error).message}`);
  }
  const fn = mod[exportName];
  if (typeof fn !== 'function')
    throw new ResolveError(
      `module ${JSON.stringify(path)} has no exported function ${JSON.stringify(exportName)}${await changedSinceLoaded(file)}`,
    );
  return fn as Handler;
}

/** What to add to "not registered" when the registry's module file changed after it was loaded. */
async function registryChanged(registry: Registry): Promise<string> {
  const file = origins.get(registry);
  return file === undefined ? '' : changedSinceLoaded(file);
}

/** The registered name nearest `name` (at most two edits, or a third of its letters), as a misspelling's likely meaning. */
function nearest(name: string, names: string[]): string | null {
  let best: string | null = null;
  let bestD = Math.max(2, Math.floor(name.length / 3)) + 1;
  for (const n of names) {
    // Edit distance, one row at a time.
    let row = Array.from({ length: n.length + 1 }, (_, j) => j);
    for (let i = 1; i <= name.length; i++) {
      const next = [i];
      for (let j = 1; j <= n.length; j++)
        next[j] = Math.min(row[j]! + 1, next[j - 1]! + 1, row[j - 1]! + (name[i - 1] === n[j - 1] ? 0 : 1));
      row = next;
    }
    if (row[n.length]! < bestD) [best, bestD] = [n, row[n.length]!];
  }
  return best;
}
