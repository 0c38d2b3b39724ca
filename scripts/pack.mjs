// Builds the npm package `@dreamlake/lakeshore` (its bin: `lakeshore`) into package/ and packs it (`npm pack`): ESM JavaScript for
// Node >= 18, Bun, Deno, browsers and Workers, with .d.ts types:
//   @dreamlake/lakeshore        the HTTP client, the Queue API and the worker (client/index.ts)
//   @dreamlake/lakeshore/local  the local SQLite plane too (client/local/index.ts; node:sqlite, Node >= 22.12)
//   @dreamlake/lakeshore/browser  streamJob for web pages (client/browser/index.ts; no dependencies)
//   @dreamlake/lakeshore/push  a push receiver's part (client/receiver.ts; no Node built-in, no tar:
//                    a Worker bundles it with no compatibility flag)
//   bin lakeshore    the CLI (client/cli/bin.ts; commander is bundled into it)
// The plane's SQL migrations ship in package/migrations for the local plane.
//
//   node scripts/pack.mjs [--out DIR]     prints the tarball's path
import { execFileSync } from 'node:child_process';
import { chmodSync, cpSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { build } from 'esbuild';
import { ROOT } from './toolchain.mjs';

const { values } = parseArgs({ options: { out: { type: 'string', default: join(ROOT, 'package') } } });
const PKG = join(ROOT, 'package');
const DIST = join(PKG, 'dist');
rmSync(DIST, { recursive: true, force: true });
rmSync(join(PKG, 'migrations'), { recursive: true, force: true });

const pkg = JSON.parse(readFileSync(join(PKG, 'package.json'), 'utf8'));
const deps = Object.keys(pkg.dependencies ?? {});
const common = { bundle: true, format: 'esm', target: 'es2022', metafile: true, logLevel: 'error' };
// The library: runtime-neutral, one copy of each class across its entries (so instanceof holds).
const lib = await build({
  ...common,
  entryPoints: {
    index: join(ROOT, 'client', 'index.ts'),
    local: join(ROOT, 'client', 'local', 'index.ts'),
    browser: join(ROOT, 'client', 'browser', 'index.ts'),
    push: join(ROOT, 'client', 'receiver.ts'),
  },
  outdir: DIST,
  splitting: true,
  platform: 'neutral',
  mainFields: ['module', 'main'],
  external: ['node:*', ...deps],
});
// The CLI: Node only, its own bundle (commander inside; its CommonJS needs a require). Its chunks
// all get the banner; only the entry runs it as a script.
const cli = await build({
  ...common,
  entryPoints: { lakeshore: join(ROOT, 'client', 'cli', 'bin.ts') },
  outdir: join(DIST, 'cli'),
  splitting: true, // the local plane (node:sqlite) is a chunk of its own, loaded only when used
  platform: 'node',
  external: deps,
  banner: {
    js: "#!/usr/bin/env node\nimport { createRequire as __lakeshoreRequire } from 'node:module';\nconst require = __lakeshoreRequire(import.meta.url);",
  },
});
// Every package the bundles import must be a dependency of the package.
for (const out of [...Object.values(lib.metafile.outputs), ...Object.values(cli.metafile.outputs)]) {
  for (const imp of out.imports) {
    if (imp.external && !imp.path.startsWith('node:') && !deps.includes(imp.path)) {
      throw new Error(`the bundle imports ${imp.path}, which package/package.json does not depend on`);
    }
  }
}
chmodSync(join(DIST, 'cli', 'lakeshore.js'), 0o755);

// Types: tsc's declarations, their relative imports pointed at .js (TypeScript finds the .d.ts).
execFileSync(process.execPath, [join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', join(ROOT, 'tsconfig.package.json')], {
  cwd: ROOT,
  stdio: 'inherit',
});
const fixImports = (dir) => {
  for (const f of readdirSync(dir)) {
    const p = join(dir, f);
    if (statSync(p).isDirectory()) fixImports(p);
    else if (f.endsWith('.d.ts'))
      writeFileSync(p, readFileSync(p, 'utf8').replace(/(from\s+|import\()(['"])(\.\.?\/[^'"]+)\.ts\2/g, '$1$2$3.js$2'));
  }
};
fixImports(join(DIST, 'types'));

mkdirSync(join(PKG, 'migrations'));
for (const f of readdirSync(join(ROOT, 'migrations')))
  if (f.endsWith('.sql')) cpSync(join(ROOT, 'migrations', f), join(PKG, 'migrations', f));

mkdirSync(values.out, { recursive: true });
const name = execFileSync('npm', ['pack', '--pack-destination', values.out, '--loglevel', 'error'], { cwd: PKG, encoding: 'utf8' })
  .trim()
  .split('\n')
  .pop();
process.stdout.write(`${join(values.out, name)}\n`);
