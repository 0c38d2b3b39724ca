#!/usr/bin/env node
// The `lakeshore` command. Runs the CLI on Node >= 22.12, bootstrapping it (and dependencies)
// into the project when the system Node is older; on a recent Node it runs in this process.
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { ROOT, setup } from '../scripts/toolchain.mjs';

const main = join(ROOT, 'client', 'cli', 'main.ts');
const [maj, min] = process.versions.node.split('.').map(Number);
if (maj > 22 || (maj === 22 && min >= 18)) {
  process.removeAllListeners('warning');
  const { main: run } = await import(main);
  process.exitCode = await run(process.argv.slice(2));
} else {
  const t = setup();
  // LAKESHORE_LAUNCHED: the CLI stops as on SIGTERM once this launcher is gone (killed outright,
  // it passes no signal on), so that no worker it started runs on as an orphan.
  const child = spawn(t.node, ['--disable-warning=ExperimentalWarning', main, ...process.argv.slice(2)], {
    stdio: 'inherit',
    env: { ...t.env, LAKESHORE_LAUNCHED: '1' },
  });
  for (const sig of ['SIGINT', 'SIGTERM']) process.on(sig, () => child.kill(sig));
  child.on('exit', (code, signal) => process.exit(code ?? (signal ? 1 : 0)));
}
