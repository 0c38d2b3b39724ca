// The Python client's unittest suite against a fresh plane (loopback, temp state, random token),
// with two shards: its namespaces spread over both, and a namespace's move has a shard to go to.
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ROOT } from './toolchain.mjs';
import { newToken, startPlane } from './plane.mjs';

const dir = mkdtempSync(join(tmpdir(), 'lakeshore-py-'));
const token = newToken('lsk_test_');
const plane = await startPlane({ node: process.execPath, env: process.env, persistTo: dir, shards: 2, vars: { LAKESHORE_TOKEN: token } });
let status = 1;
try {
  const r = spawnSync(process.env.LAKESHORE_PYTHON ?? 'python3', ['-m', 'unittest', 'discover', '-s', 'tests', '-v'], {
    cwd: join(ROOT, 'client', 'python'),
    stdio: ['ignore', 'inherit', 'pipe'],
    encoding: 'utf8',
    env: { ...process.env, LAKESHORE_URL: plane.url, LAKESHORE_TOKEN: token, LAKESHORE_NODE: process.execPath },
  });
  process.stderr.write(r.stderr ?? '');
  status = r.status ?? 1;
  // Report the counts the way the vitest suites do, for npm test's closing line.
  const ran = Number(/Ran (\d+) tests?/.exec(r.stderr ?? '')?.[1] ?? 0);
  const num = (k) => Number(new RegExp(`${k}=(\\d+)`).exec(r.stderr ?? '')?.[1] ?? 0);
  const failed = num('failures') + num('errors');
  const skipped = num('skipped');
  const reports = join(ROOT, 'node_modules', '.cache', 'lakeshore-tests');
  mkdirSync(reports, { recursive: true });
  writeFileSync(
    join(reports, 'python.json'),
    JSON.stringify({ numPassedTests: ran - failed - skipped, numFailedTests: failed, numPendingTests: skipped }),
  );
} finally {
  await plane.stop();
  rmSync(dir, { recursive: true, force: true });
}
process.exit(status);
