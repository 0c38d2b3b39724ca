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

export async function loadModule(file: string): Promise<Record<string, unknown>> {
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
