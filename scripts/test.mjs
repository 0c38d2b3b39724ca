// `npm test`: every suite, in order, on Node >= 22.12 (scripts/run.mjs bootstraps it).
//   lint        Biome: the formatting and lint rules of biome.jsonc (`npm run format` fixes the formatting)
//   typecheck   strict TypeScript over the Worker and the Node side
//   bundle      the deploy bundle (`wrangler deploy --dry-run`): it builds, within its size budget
//   edge        inside workerd (@cloudflare/vitest-plugin): local D1 and Durable Objects
//   node        the Node clients against a real `wrangler dev` on a free loopback port
//   crash       the plane and workers killed under load (test/fault/crash.test.ts), alone
//   python      the stdlib Python client (python3 -m unittest) against its own `wrangler dev`
//   browser     real Chromium (Debian's, via playwright-core) streaming a job from another origin
// `npm test -- edge` (or node, crash, python, browser, typecheck, bundle) runs one suite.
// `npm run test:fast` (`npm test -- fast`): every guard's proof in under three minutes, no server
// started: lint, typecheck, the workerd suite, and the Node tests that need no plane process
// (vitest.fast.config.ts: the model tests and the conformance suite on the in-memory and Python
// local planes). `npm run mutants` breaks each guard in turn and checks this tier fails.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { stripVTControlCharacters } from 'node:util';
import { ensurePython, ROOT } from './toolchain.mjs';

const vitest = join(ROOT, 'node_modules', 'vitest', 'vitest.mjs');
const reports = join(ROOT, 'node_modules', '.cache', 'lakeshore-tests');
mkdirSync(reports, { recursive: true });
const vitestRun = (config, name) => [
  vitest,
  'run',
  '-c',
  config,
  '--reporter=default',
  '--reporter=json',
  `--outputFile.json=${join(reports, `${name}.json`)}`,
];
const suites = {
  lint: [join(ROOT, 'node_modules', '@biomejs', 'biome', 'bin', 'biome'), 'ci', '--reporter=summary', ROOT],
  typecheck: [join(ROOT, 'scripts', 'typecheck.mjs')],
  bundle: [join(ROOT, 'scripts', 'bundle.mjs')],
  edge: vitestRun('vitest.edge.config.ts', 'edge'),
  node: vitestRun('vitest.node.config.ts', 'node'),
  crash: vitestRun('vitest.crash.config.ts', 'crash'),
  python: [join(ROOT, 'scripts', 'test-python.mjs')],
  browser: vitestRun('vitest.browser.config.ts', 'browser'),
  fastNode: vitestRun('vitest.fast.config.ts', 'fastNode'),
};
/** Named groups of suites; a group is not part of the default run. */
const groups = { fast: ['lint', 'typecheck', 'edge', 'fastNode'] };
const all = ['lint', 'typecheck', 'bundle', 'edge', 'node', 'crash', 'python', 'browser'];
// The Python with the package's optional extras (croniter), for the Python suite and the conformance target.
process.env.LAKESHORE_PYTHON ??= ensurePython();
const counts = { passed: 0, failed: 0, skipped: 0 };
/** The failed tests by name, each with why: said again at the end, where a CI log's tail shows them. */
const failures = [];
/** The first lines of a failed test's message, without colour or stack (a CI log may keep only its tail). */
function why(t) {
  const lines = stripVTControlCharacters(String(t.failureMessages?.[0] ?? ''))
    .split('\n')
    .filter((l) => l.trim() && !/^\s+at /.test(l))
    .slice(0, 8);
  return lines.length ? `\n    ${lines.join('\n    ')}` : '';
}
function tally(name) {
  const file = join(reports, `${name}.json`);
  if (!existsSync(file)) return;
  const r = JSON.parse(readFileSync(file, 'utf8'));
  for (const f of r.testResults ?? [])
    for (const t of f.assertionResults ?? [])
      if (t.status === 'failed')
        failures.push(`${name}: ${String(f.name ?? '').replace(`${ROOT}/`, '')} > ${t.fullName ?? t.title}${why(t)}`);
  counts.passed += r.numPassedTests;
  counts.failed += r.numFailedTests;
  counts.skipped += r.numPendingTests + (r.numTodoTests ?? 0);
  rmSync(file);
}
const pick = process.argv.slice(2).flatMap((a) => groups[a] ?? (a in suites ? [a] : []));
const results = [];
for (const name of pick.length ? pick : all) {
  process.stderr.write(`\n[lakeshore] ── ${name} ──\n`);
  const t0 = Date.now();
  const r = spawnSync(process.execPath, suites[name], { cwd: ROOT, stdio: 'inherit', env: process.env });
  results.push({ name, ok: r.status === 0, s: ((Date.now() - t0) / 1000).toFixed(1) });
  tally(name);
}
for (const f of failures) process.stderr.write(`\n[lakeshore] FAILED ${f}`);
process.stderr.write(`\n[lakeshore] ${results.map((r) => `${r.name} ${r.ok ? 'ok' : 'FAILED'} (${r.s}s)`).join(', ')}\n`);
process.stdout.write(`${counts.passed} passed, ${counts.failed} failed, ${counts.skipped} skipped\n`);
process.exit(results.every((r) => r.ok) ? 0 : 1);
