// The CLI as one module of plain JavaScript, for bin/lakeshore.mjs: Node strips the types of the
// CLI's 60-odd TypeScript files at every start (about 0.2 s of a `--help`'s 0.35 s on these
// machines), and a command is a process of its own each time a user or a script runs one.
//
// esbuild bundles client/cli/main.ts (its packages left to node_modules) into
// client/cli/.main.bundle.mjs, beside main.ts, so that every path its modules find from their
// own `import.meta.url` (the Python package, the checkout's root, the migrations, the worker's
// frames in a stack) comes out as from the sources. A manifest beside it names the sources it
// was built from and a hash of their contents: a start reads and hashes them (132 files, 700 KB:
// about 5 ms) and builds again when any changed, so an edit, a checkout or a mutant is run as
// written. Contents, not modification times: a file put back with its old time is still seen.
// Both files are git-ignored. Where no bundle can be made (no esbuild, a read-only checkout), the
// CLI runs from its sources as before.
import { createHash } from 'node:crypto';
import { readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { pathToFileURL } from 'node:url';

const BUNDLE = '.main.bundle.mjs';
const MANIFEST = '.main.bundle.json';

/** A hash of the sources `inputs` (paths from the checkout's root), their contents as `contents` gives them. */
const hashOf = (inputs, contents) => {
  const h = createHash('sha256');
  for (const f of inputs) h.update(f).update('\0').update(contents(f)).update('\0');
  return h.digest('hex');
};

/** The URL to import the CLI from: its bundle, built again when a source changed; else main.ts itself. */
export async function cliModule(root) {
  const dir = join(root, 'client', 'cli');
  try {
    const m = JSON.parse(readFileSync(join(dir, MANIFEST), 'utf8'));
    if (hashOf(m.inputs, (f) => readFileSync(join(root, f))) === m.hash) return pathToFileURL(join(dir, BUNDLE)).href;
  } catch {
    // no bundle yet, or a source it named is gone: build one
  }
  try {
    return await build(root, dir);
  } catch {
    return pathToFileURL(join(dir, 'main.ts')).href;
  }
}

async function build(root, dir) {
  const { build } = await import('esbuild');
  // The sources as esbuild read them, so that the manifest's hash is of what the bundle holds, not
  // of the files as they are a moment later.
  const read = new Map();
  const asRead = {
    name: 'as-read',
    setup(b) {
      b.onLoad({ filter: /\.ts$/ }, (a) => {
        const contents = readFileSync(a.path);
        read.set(relative(root, a.path), contents);
        return { contents, loader: 'ts' };
      });
    },
  };
  const out = await build({
    absWorkingDir: root,
    entryPoints: [join(dir, 'main.ts')],
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node22',
    packages: 'external',
    metafile: true,
    write: false,
    logLevel: 'silent',
    plugins: [asRead],
  });
  const inputs = Object.keys(out.metafile.inputs).sort();
  if (inputs.some((f) => !read.has(f))) throw new Error('a source of the CLI was not read as TypeScript');
  // Written under names of this process's own, then renamed: a CLI starting meanwhile reads the
  // old bundle or the new one whole, and the manifest names a bundle that is there.
  const tmp = `.${process.pid}.tmp`;
  writeFileSync(join(dir, BUNDLE + tmp), out.outputFiles[0].contents);
  renameSync(join(dir, BUNDLE + tmp), join(dir, BUNDLE));
  writeFileSync(join(dir, MANIFEST + tmp), JSON.stringify({ hash: hashOf(inputs, (f) => read.get(f)), inputs }));
  renameSync(join(dir, MANIFEST + tmp), join(dir, MANIFEST));
  return pathToFileURL(join(dir, BUNDLE)).href;
}
