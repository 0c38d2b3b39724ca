// TypeScript strict checks of both halves: the Worker (workerd types) and Node (client, tests).
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { ROOT } from './toolchain.mjs';

const tsc = join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc');
let failed = 0;
for (const project of ['tsconfig.worker.json', 'tsconfig.node.json']) {
  const r = spawnSync(process.execPath, [tsc, '-p', project, '--noEmit'], { cwd: ROOT, stdio: 'inherit' });
  if (r.status !== 0) failed++;
}
process.exit(failed ? 1 : 0);
