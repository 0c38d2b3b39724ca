/**
 * Imports a handlers module (a file), saying why one does not load: its error's name and message
 * and, for a syntax error, where (an import's SyntaxError carries no location, and `node --check`
 * prints it: file:line, the line, a caret). Node only: the worker's imports and the CLI's --module.
 */
export class ModuleLoadError extends Error {
  /** The module's own error (a SyntaxError, a missing import...). */
  readonly failure: Error;
  constructor(message: string, failure: Error) {
    super(message);
    this.name = 'ModuleLoadError';
    this.failure = failure;
  }
}

/** When this process first loaded each file (ms): an import is cached, so it runs that code from then on. */
const firstLoaded = new Map<string, number>();

export async function loadModule(file: string): Promise<Record<string, unknown>> {
  if (!firstLoaded.has(file)) firstLoaded.set(file, Date.now());
  const { pathToFileURL } = await import('node:url');
  try {
    return (await import(pathToFileURL(file).href)) as Record<string, unknown>;
  } catch (e) {
    const err = e instanceof Error ? e : new Error(String(e));
    let where = '';
    if (err.name === 'SyntaxError') {
      const { spawnSync } = await import('node:child_process');
      where = spawnSync(process.execPath, ['--check', file], { encoding: 'utf8' }).stderr.split('\n').slice(0, 3).join('\n').trim();
    }
    // "Cannot find module X imported from <this file>": where it was imported from is this loader.
    const message = err.message.replace(/ imported from \S+$/, '');
    throw new ModuleLoadError(`${err.name}: ${message}${where ? `\n${where}` : ''}`, err);
  }
}

/**
 * What to add to "has no function F" when `file` changed after this process first loaded it: the
 * function is likely new, and the worker runs the code it loaded. Empty when it did not change.
 */
export async function changedSinceLoaded(file: string): Promise<string> {
  const at = firstLoaded.get(file);
  if (at === undefined) return '';
  const { stat } = await import('node:fs/promises');
  const { basename } = await import('node:path');
  const changed = await stat(file).then(
    (s) => s.mtimeMs > at,
    () => false,
  );
  return changed
    ? `; ${basename(file)} changed after this worker loaded it, and a worker runs the code it loaded: start it again to run the change`
    : '';
}
