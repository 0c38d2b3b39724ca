#!/usr/bin/env node
// The `lakeshore` command. Runs the CLI on Node >= 22.12, bootstrapping it (and dependencies)
// into the project when the system Node is older; on a recent Node it runs in this process, from
// a bundle of its sources that is made again whenever they change (scripts/cli-bundle.mjs).
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { ensureDeps, ensureNode, envWith, ROOT } from '../scripts/toolchain.mjs';

const [maj, min] = process.versions.node.split('.').map(Number);
if (maj > 22 || (maj === 22 && min >= 18)) {
  process.removeAllListeners('warning');
  const { cliModule } = await import('../scripts/cli-bundle.mjs');
  const cli = await import(await cliModule(ROOT));
  if (process.env.LAKESHORE_LAUNCHED === '1') await cli.asLaunched();
  else process.exitCode = await cli.main(process.argv.slice(2));
} else {
  // Node and the dependencies only: the Worker's types and the dashboard are the plane's, made by
  // `npm start` and the tests (and by `lakeshore dev`, which runs `npm start`).
  const node = ensureNode();
  ensureDeps(node);
  // LAKESHORE_LAUNCHED: the CLI stops as on SIGTERM once this launcher is gone (killed outright,
  // it passes no signal on), so that no worker it started runs on as an orphan.
  const child = spawn(node, ['--disable-warning=ExperimentalWarning', fileURLToPath(import.meta.url), ...process.argv.slice(2)], {
    stdio: 'inherit',
    env: envWith(node, { LAKESHORE_LAUNCHED: '1' }),
  });
  for (const sig of ['SIGINT', 'SIGTERM']) process.on(sig, () => child.kill(sig));
  child.on('exit', (code, signal) => process.exit(code ?? (signal ? 1 : 0)));
}
