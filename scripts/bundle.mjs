// The deploy bundle, built as `npm run deploy` would build it but without uploading anything:
// `wrangler deploy --dry-run --outdir` (no network, no account). Fails if it does not build, or
// if it grows past BUDGET (a guard against pulling in a heavy dependency by accident).
//   node scripts/bundle.mjs [--outdir DIR]
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { gzipSync } from 'node:zlib';
import { quietEnv } from './plane.mjs';
import { ROOT } from './toolchain.mjs';

const BUDGET = 640 * 1024;
const { values } = parseArgs({ options: { outdir: { type: 'string' } } });
const out = values.outdir ?? mkdtempSync(join(tmpdir(), 'lakeshore-bundle-'));
try {
  execFileSync(process.execPath, [join(ROOT, 'node_modules', 'wrangler', 'bin', 'wrangler.js'), 'deploy', '--dry-run', '--outdir', out], {
    cwd: ROOT,
    env: quietEnv({ ...process.env, WRANGLER_LOG: 'error' }),
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  const js = readFileSync(join(out, 'index.js'));
  const kib = (n) => `${(n / 1024).toFixed(0)} KiB`;
  process.stdout.write(`[lakeshore] deploy bundle: ${kib(js.length)} (${kib(gzipSync(js).length)} gzipped)\n`);
  if (js.length > BUDGET) {
    process.stderr.write(`[lakeshore] the bundle is over its budget of ${kib(BUDGET)}\n`);
    process.exitCode = 1;
  }
} finally {
  if (!values.outdir) rmSync(out, { recursive: true, force: true });
}
