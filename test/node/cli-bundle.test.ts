/**
 * The CLI's bundle (scripts/cli-bundle.mjs): what bin/lakeshore.mjs runs is what its sources say
 * now, however often they change, and a path found from a module's own URL comes out as from the
 * sources. Run on a stand-in checkout of two modules, so the real bundle is not touched.
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { tempDir } from '../support/tmp.ts';
import { cliModule } from '../../scripts/cli-bundle.mjs';

/** A checkout with a client/cli/main.ts whose main() answers what its imported module says. */
function checkout(word: string): { root: string; say: (w: string) => void } {
  const root = tempDir('lakeshore-cli-bundle-');
  mkdirSync(join(root, 'client', 'cli'), { recursive: true });
  const say = (w: string) => writeFileSync(join(root, 'client', 'word.ts'), `export const word: string = ${JSON.stringify(w)};\n`);
  say(word);
  writeFileSync(
    join(root, 'client', 'cli', 'main.ts'),
    [
      "import { word } from '../word.ts';",
      "import { dirname } from 'node:path';",
      "import { fileURLToPath } from 'node:url';",
      'export async function main(): Promise<number> {',
      "  process.stdout.write(word + ' ' + dirname(fileURLToPath(import.meta.url)));",
      '  return 0;',
      '}',
    ].join('\n'),
  );
  return { root, say };
}

/** What the module at `url` prints, in a process of its own (this one would answer from its import cache). */
function run(url: string): string {
  const r = spawnSync(process.execPath, ['--input-type=module', '-e', `const m = await import(${JSON.stringify(url)}); await m.main();`], {
    encoding: 'utf8',
  });
  expect(r.stderr).toBe('');
  return r.stdout;
}

describe('the CLI bundle', () => {
  it('is made again when a source it holds changes, and its modules find paths as from their sources', async () => {
    const c = checkout('first');
    const url: string = await cliModule(c.root);
    expect(url.endsWith('/client/cli/.main.bundle.mjs')).toBe(true);
    expect(run(url)).toBe(`first ${join(c.root, 'client', 'cli')}`);
    const manifest = JSON.parse(readFileSync(join(c.root, 'client', 'cli', '.main.bundle.json'), 'utf8'));
    expect(manifest.inputs).toEqual(['client/cli/main.ts', 'client/word.ts']);

    // Unchanged: the same bundle, not made again.
    const before = readFileSync(fileURLToPath(url), 'utf8');
    writeFileSync(fileURLToPath(url), `${before}\n// kept\n`);
    expect(await cliModule(c.root)).toBe(url);
    expect(readFileSync(fileURLToPath(url), 'utf8')).toContain('// kept');

    // An imported module changed (same length, as an edit of one letter is): made again.
    c.say('forst');
    expect(run(await cliModule(c.root))).toBe(`forst ${join(c.root, 'client', 'cli')}`);
    expect(readFileSync(fileURLToPath(url), 'utf8')).not.toContain('// kept');
  });

  it('falls back to the sources when no bundle can be made', async () => {
    const c = checkout('plain');
    writeFileSync(join(c.root, 'client', 'word.ts'), 'export const word: string = ;\n'); // esbuild refuses it
    expect(await cliModule(c.root)).toBe(`file://${join(c.root, 'client', 'cli', 'main.ts')}`);
  });
});
