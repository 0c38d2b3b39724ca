/**
 * node:sqlite, loaded so that a Node without it is told what to do (the local plane needs Node >=
 * 22.12), and without Node's "SQLite is an experimental feature" warning: the local plane is what
 * lakeshore ships, and the warning would be printed to every user of it. Every other warning passes.
 */
type Sqlite = typeof import('node:sqlite');

async function load(): Promise<Sqlite> {
  const emit = process.emitWarning;
  process.emitWarning = function (this: unknown, warning: string | Error, ...rest: unknown[]) {
    const text = typeof warning === 'string' ? warning : warning?.message;
    if (/SQLite is an experimental feature/.test(String(text))) return;
    return (emit as (...a: unknown[]) => void).call(process, warning, ...rest);
  } as typeof process.emitWarning;
  try {
    return await import('node:sqlite');
  } catch (e) {
    throw new Error(
      `lakeshore's local SQLite plane needs Node >= 22.12 (node:sqlite), and this is Node ${process.versions.node}: run it on Node 22 or later, or use an edge plane (HttpDispatch, LAKESHORE_URL) from this Node (${e instanceof Error ? e.message : String(e)})`,
    );
  } finally {
    process.emitWarning = emit;
  }
}

const sqlite = await load();
export const DatabaseSync = sqlite.DatabaseSync;
export type DatabaseSync = import('node:sqlite').DatabaseSync;
