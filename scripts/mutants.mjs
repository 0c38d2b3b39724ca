// `npm run mutants [-- ID ...]`: breaks each guard listed in test/mutants.json, one at a time, and
// checks that the fast tier (`npm run test:fast`) fails with it, saying which test caught it.
//
// Each mutant makes one or more edits to one file: an exact piece of source (`find`, which must
// occur once) replaced by `replace`.
// The tests it names run first (a file of test/node or test/fault in its tier's config, or a
// Python unittest, `client/python/tests/test_local.py:Class`); if they all pass, the whole fast tier runs (the workerd suite and vitest.fast.config.ts). A mutant no test catches is a guard without a proof: the script exits 1.
// The source file is restored after each mutant, and on Ctrl-C.
//
// It runs on demand and in `npm run fault`, not in CI: about a minute a mutant on this machine.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { newToken, startPlane } from './plane.mjs';
import { ensurePython, ROOT } from './toolchain.mjs';

const vitest = join(ROOT, 'node_modules', 'vitest', 'vitest.mjs');
// The fast tier's Python local plane runs on the Python with the package's extras, as in `npm test`.
process.env.LAKESHORE_PYTHON ??= ensurePython();
const list = JSON.parse(readFileSync(join(ROOT, 'test', 'mutants.json'), 'utf8')).mutants;
const only = process.argv.slice(2);
const mutants = only.length ? list.filter((m) => only.includes(m.id)) : list;
const out = mkdtempSync(join(tmpdir(), 'lakeshore-mutants-'));

/** The conformance targets that need a served plane (the node tier's); memory and Python are the fast tier's. */
const SERVED_CONFORMANCE = ['test/conformance/http.test.ts', 'test/conformance/file.test.ts'];

/**
 * Which vitest config runs a named test file: the workerd suite's, the node tier's (a guard whose
 * proof needs a real plane, such as a move under load), or the fast tier's.
 */
const configOf = (file) =>
  file.startsWith('test/edge/')
    ? 'vitest.edge.config.ts'
    : file.startsWith('test/node/') || SERVED_CONFORMANCE.includes(file)
      ? 'vitest.node.config.ts'
      : file.startsWith('test/fault/')
        ? 'vitest.crash.config.ts'
        : 'vitest.fast.config.ts';

const META = 'test/model/mutants-current.test.ts';

/** Runs `files` of one config (all of it when empty) until the first failure; answers the first failed test, or null. */
function firstFailure(config, files) {
  const report = join(out, 'report.json');
  rmSync(report, { force: true });
  // Not the check that mutants.json is current: a mutant applied makes it fail (its code is not
  // found), so it would catch every mutant, proving no guard.
  const args = ['run', '-c', config, '--bail=1', '--reporter=json', `--outputFile.json=${report}`, `--exclude=${META}`, ...files];
  spawnSync(process.execPath, [vitest, ...args], {
    cwd: ROOT,
    stdio: ['ignore', 'ignore', 'ignore'],
    env: process.env,
  });
  let r;
  try {
    r = JSON.parse(readFileSync(report, 'utf8'));
  } catch {
    // No report: vitest itself failed to run. That is no test failing, and says nothing of the guard.
    throw new Error(`${config}: vitest wrote no report for ${files.join(' ') || 'the whole config'}`);
  }
  for (const f of r.testResults) {
    const t = f.assertionResults.find((a) => a.status === 'failed');
    if (t) return `${f.name.slice(ROOT.length + 1)} > ${t.fullName}`;
    if (f.status === 'failed') return `${f.name.slice(ROOT.length + 1)} (${(f.message || 'failed to load').split('\n')[0]})`;
  }
  return null;
}

let pythonPlane = null;
/** A plane for the Python tests that need one (test_http.py, the EdgePlane cases): started once, at the first. */
async function planeForPython() {
  if (!pythonPlane) {
    const token = newToken('lsk_test_');
    const plane = await startPlane({
      node: process.execPath,
      env: process.env,
      persistTo: join(out, 'plane'),
      vars: { LAKESHORE_TOKEN: token },
    });
    pythonPlane = { plane, env: { LAKESHORE_URL: plane.url, LAKESHORE_TOKEN: token, LAKESHORE_NODE: process.execPath } };
  }
  return pythonPlane.env;
}

/**
 * Python tests a mutant names (`client/python/tests/test_x.py:Class[.method]`): run with unittest,
 * against a plane of their own as `npm test -- python` runs them; answers the first that failed, or null.
 */
async function firstPythonFailure(tests) {
  const selectors = tests.map((t) => {
    const [path, name] = t.split(':');
    return `tests.${path.replace(/^client\/python\/tests\//, '').replace(/\.py$/, '')}${name ? `.${name}` : ''}`;
  });
  const env = { ...process.env };
  delete env.LAKESHORE_NAMESPACE;
  Object.assign(env, await planeForPython());
  const r = spawnSync(process.env.LAKESHORE_PYTHON, ['-m', 'unittest', '-f', ...selectors], {
    cwd: join(ROOT, 'client', 'python'),
    encoding: 'utf8',
    env,
    timeout: 600_000,
  });
  if (r.status === 0) return null;
  // `FAIL: test_x (tests.test_local.Class.test_x)`: said as the vitest failures are, file > test.
  const failed = /^(?:FAIL|ERROR): \S+ \(tests\.(\w+)\.([^)]*)\)/m.exec(r.stderr ?? '');
  return failed ? `client/python/tests/${failed[1]}.py > ${failed[2]}` : `python ${selectors.join(' ')} (exit ${r.status ?? r.signal})`;
}

async function caughtBy(m) {
  const python = (m.tests ?? []).filter((t) => /\.py(:|$)/.test(t));
  if (python.length) {
    const hit = await firstPythonFailure(python);
    if (hit) return hit;
  }
  const named = Object.entries(
    Object.groupBy(
      (m.tests ?? []).filter((t) => !python.includes(t)),
      configOf,
    ),
  );
  for (const [config, files] of named) {
    const hit = firstFailure(config, files);
    if (hit) return hit;
  }
  return firstFailure('vitest.fast.config.ts', []) ?? firstFailure('vitest.edge.config.ts', []);
}

let restore = null;
for (const sig of ['SIGINT', 'SIGTERM']) {
  process.on(sig, () => {
    restore?.();
    process.exit(130);
  });
}

const rows = [];
for (const m of mutants) {
  const file = join(ROOT, m.file);
  const source = readFileSync(file, 'utf8');
  const stale = m.edits.map((e) => [e, source.split(e.find).length - 1]).find(([, n]) => n !== 1);
  if (stale) {
    rows.push({
      m,
      verdict: 'STALE',
      by: `${JSON.stringify(stale[0].find)} occurs ${stale[1]} times in ${m.file}: update test/mutants.json`,
    });
    continue;
  }
  const t0 = Date.now();
  process.stderr.write(`[mutants] ${m.id}: ${m.breaks} ... `);
  restore = () => writeFileSync(file, source);
  writeFileSync(
    file,
    m.edits.reduce((text, e) => text.replace(e.find, () => e.replace), source),
  );
  let by;
  try {
    by = await caughtBy(m);
  } finally {
    restore();
    restore = null;
  }
  process.stderr.write(`${by ? 'caught' : 'SURVIVED'} (${((Date.now() - t0) / 1000).toFixed(0)} s)\n`);
  rows.push({ m, verdict: by ? 'caught' : 'SURVIVED', by: by ?? 'no test of the fast tier failed' });
}
await pythonPlane?.plane.stop();
rmSync(out, { recursive: true, force: true });

process.stdout.write('\n| mutant | breaks | guards | caught by |\n|---|---|---|---|\n');
for (const { m, verdict, by } of rows)
  process.stdout.write(`| ${m.id} | ${m.breaks} | ${m.guards} | ${verdict === 'caught' ? by : `**${verdict}**: ${by}`} |\n`);
const bad = rows.filter((r) => r.verdict !== 'caught');
process.stdout.write(`\n${rows.length - bad.length} of ${rows.length} mutants caught\n`);
process.exit(bad.length ? 1 : 0);
