/**
 * The `lakeshore` command of the npm package: the CLI on the Node that runs it (>= 18; the local
 * SQLite plane needs >= 22.12 and is loaded only when a command uses it). Node's experimental
 * warning for node:sqlite is not printed; every other warning is.
 */
process.removeAllListeners('warning');
process.on('warning', (w) => {
  if (w.name === 'ExperimentalWarning' && /SQLite/i.test(w.message)) return;
  process.stderr.write(`${w.name}: ${w.message}\n`);
});
const { main } = await import('./main.ts');
process.exitCode = await main(process.argv.slice(2));
export {};
