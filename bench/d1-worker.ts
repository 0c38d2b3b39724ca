/**
 * A small Worker, given as source that imports the core's own modules, bundled and served on a
 * fresh local D1 (binding DB) with the plane's migrations applied: what bench/d1-ceiling.ts and
 * bench/rows-forms.ts run their statements through, with nothing else in the workerd process.
 */
import { build } from 'esbuild';
import { Miniflare, convertV4MiniflareOptions } from 'miniflare';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { applyMigrations } from '../scripts/plane.mjs';

/** The repository's root, against which a Worker's imports resolve. */
export const ROOT = fileURLToPath(new URL('..', import.meta.url));

export async function d1Worker(name: string, source: string): Promise<{ mf: Miniflare; dispose: () => Promise<void> }> {
  const bundled = await build({
    stdin: { contents: source, resolveDir: ROOT, loader: 'js' },
    bundle: true,
    format: 'esm',
    platform: 'neutral',
    write: false,
    logLevel: 'error',
  });
  const dir = mkdtempSync(join(process.env.BENCH_STATE_DIR ?? tmpdir(), `lakeshore-${name}-`));
  await applyMigrations({ node: process.execPath, env: process.env, persistTo: dir });
  const mf = new Miniflare(
    convertV4MiniflareOptions({
      cf: false,
      resourcePersistencePath: join(dir, 'v3'),
      workers: [
        {
          name,
          compatibilityDate: '2025-11-01',
          modules: [{ type: 'ESModule', path: 'w.js', contents: bundled.outputFiles[0]!.text }],
          d1Databases: { DB: { id: '00000000-0000-4000-8000-000000000000' } },
        },
      ],
    }),
  );
  return {
    mf,
    dispose: async () => {
      await mf.dispose();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
