#!/usr/bin/env node
// Entry point of `npm start` / `npm test`: bootstraps the toolchain (Node 22 if the system Node is
// older, then dependencies), then runs the task on Node >= 22.12. Plain JS so it runs on Node 20.
import { join } from 'node:path';
import { ROOT, run, setup } from './toolchain.mjs';

const task = process.argv[2];
const rest = process.argv.slice(3);
const tasks = {
  dev: (t) => run(t.node, [join(ROOT, 'scripts', 'dev.mjs'), ...rest], { env: t.env }),
  test: (t) => run(t.node, [join(ROOT, 'scripts', 'test.mjs'), ...rest], { env: t.env }),
  typecheck: (t) => run(t.node, [join(ROOT, 'scripts', 'typecheck.mjs')], { env: t.env }),
  migrations: (t) => run(t.node, [join(ROOT, 'node_modules', 'drizzle-kit', 'bin.cjs'), 'generate', ...rest], { env: t.env }),
  deploy: (t) => run(t.node, [join(ROOT, 'scripts', 'deploy.mjs'), ...rest], { env: t.env }),
  fault: (t) => run(t.node, [join(ROOT, 'scripts', 'fault.mjs'), ...rest], { env: t.env }),
  mutants: (t) => run(t.node, [join(ROOT, 'scripts', 'mutants.mjs'), ...rest], { env: t.env }),
  bench: (t) => run(t.node, [join(ROOT, 'bench', 'run.mjs'), ...rest], { env: t.env }),
  pack: (t) => run(t.node, [join(ROOT, 'scripts', 'pack.mjs'), ...rest], { env: t.env }),
  'python-sql': (t) =>
    run(t.node, ['--experimental-strip-types', '--no-warnings', join(ROOT, 'scripts', 'python-sql.ts'), ...rest], { env: t.env }),
  node: (t) => run(t.node, rest, { env: t.env }),
};

if (!tasks[task]) {
  process.stderr.write(`usage: node scripts/run.mjs <${Object.keys(tasks).join('|')}> [args]\n`);
  process.exit(2);
}
const code = await tasks[task](setup());
process.exit(code);
