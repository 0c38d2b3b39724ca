// Starts the edge plane locally: local D1 with migrations applied, then the Worker on loopback
// (one Miniflare/workerd instance by default, or `wrangler dev`).
// Used by `npm start` and by the Node-side tests (fresh state, free port). Plain JS, no deps.
import { execFile, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { ROOT } from './toolchain.mjs';

const pexec = promisify(execFile);

/** Wrangler with everything that would reach the internet switched off. */
export function quietEnv(env) {
  return {
    ...env,
    WRANGLER_SEND_METRICS: 'false',
    WRANGLER_SEND_ERROR_REPORTS: 'false',
    WRANGLER_HIDE_BANNER: 'true',
    CLOUDFLARE_CF_FETCH_ENABLED: 'false',
    CI: env.CI ?? 'true',
  };
}

export const newToken = (prefix = 'lsk_dev_') => prefix + randomBytes(32).toString('base64url');

/** The dev token from .dev.vars, written with a fresh random one when missing. */
export function devToken() {
  const file = join(ROOT, '.dev.vars');
  const text = existsSync(file) ? readFileSync(file, 'utf8') : '';
  const m = /^LAKESHORE_TOKEN=(.+)$/m.exec(text);
  if (m) return m[1].trim();
  const token = newToken();
  writeFileSync(file, `${text}${text && !text.endsWith('\n') ? '\n' : ''}LAKESHORE_TOKEN=${token}\n`, { mode: 0o600 });
  return token;
}

/** What answers on a port: a lakeshore plane, another program, or nothing (null). */
export async function portHolder(port) {
  const free = await new Promise((resolve) => {
    const srv = createServer();
    srv.once('error', () => resolve(false));
    srv.listen(port, '127.0.0.1', () => srv.close(() => resolve(true)));
  });
  if (free) return null;
  try {
    const r = await fetch(`http://127.0.0.1:${port}/health`, { signal: AbortSignal.timeout(2000) });
    const j = await r.json();
    if (j?.service === 'lakeshore') return 'lakeshore';
  } catch {
    /* not a lakeshore plane */
  }
  return 'other';
}

/** Refuses a port something already listens on, saying what, before anything is started or printed. */
export async function ensurePortFree(port) {
  const holder = await portHolder(port);
  if (holder === null) return;
  const err = new Error(
    holder === 'lakeshore'
      ? `a lakeshore plane already answers at http://127.0.0.1:${port} (another \`npm start\`?). Use that one, stop it, or start this one elsewhere: npm start -- --port ${port + 1}`
      : `port ${port} on 127.0.0.1 is in use by another program. Start the plane elsewhere: npm start -- --port ${port + 1}`,
  );
  err.code = 'ERR_PORT_IN_USE';
  throw err;
}

export function freePort() {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

const wrangler = join(ROOT, 'node_modules', 'wrangler', 'bin', 'wrangler.js');

/** The D1 bindings of a plane with `shards` shards: DB (the home database), DB_1, DB_2, ... */
export const shardBindings = (shards = 1) => Array.from({ length: shards }, (_, i) => (i === 0 ? 'DB' : `DB_${i}`));

/**
 * The wrangler config of a plane with `shards` D1 databases: wrangler.toml itself for one, else a
 * copy under `persistTo` with DB_1, DB_2, ... added (local ids of their own) and its paths made
 * absolute. What an operator adds to wrangler.toml to deploy with shards (docs/deploy.md).
 */
export function configFor(persistTo, shards = 1) {
  if (shards <= 1) return join(ROOT, 'wrangler.toml');
  const extra = shardBindings(shards)
    .slice(1)
    .map(
      (b, i) =>
        `\n[[d1_databases]]\nbinding = "${b}"\ndatabase_name = "lakeshore-${i + 1}"\ndatabase_id = "00000000-0000-4000-8000-${String(i + 1).padStart(12, '0')}"\nmigrations_dir = "${join(ROOT, 'migrations')}"\n`,
    )
    .join('');
  const toml = readFileSync(join(ROOT, 'wrangler.toml'), 'utf8')
    .replace('main = "src/worker/index.ts"', `main = "${join(ROOT, 'src', 'worker', 'index.ts')}"`)
    .replace('migrations_dir = "migrations"', `migrations_dir = "${join(ROOT, 'migrations')}"`);
  mkdirSync(persistTo, { recursive: true });
  const file = join(persistTo, `wrangler-${shards}-shards.toml`);
  writeFileSync(file, toml + extra);
  return file;
}

/** Applies the migrations to every shard's local D1 under `persistTo`. */
export async function applyMigrations({ node, env, persistTo, shards = 1 }) {
  const config = configFor(persistTo, shards);
  for (const binding of shardBindings(shards)) {
    await pexec(node, [wrangler, 'd1', 'migrations', 'apply', binding, '--local', '--persist-to', persistTo, '--config', config], {
      cwd: ROOT,
      env: quietEnv(env),
    });
  }
}

/**
 * Starts the edge plane on loopback; resolves once /health answers. Returns {url, pid, child, stop()}.
 * `server`: 'miniflare' (scripts/serve.mjs: one workerd process, what `npm start` and the bench
 * use) or 'wrangler' (`wrangler dev`, which adds a proxy workerd in front; the Node-side tests use
 * it so the real dev server stays covered). `vars` are passed as --var NAME:VALUE (tests use it for
 * the token, so they never touch .dev.vars). `shards`: D1 databases (configFor).
 */
export async function startPlane(opts) {
  // A port picked here is free when picked, and another process may take it (an outgoing
  // connection's ephemeral port) before the server binds it: pick another and start again.
  for (let tries = 1; ; tries++) {
    try {
      return await startPlaneOnce(opts, tries === 1);
    } catch (e) {
      const taken = /Address already in use|EADDRINUSE/.test(String(e?.message));
      if (!taken || opts.port !== undefined || tries >= 3) throw e;
    }
  }
}

async function startPlaneOnce(
  { node, env, port, persistTo, vars = {}, log = 'warn', stdio = 'pipe', server = 'miniflare', migrate = true, quiet = false, shards = 1 },
  first,
) {
  if (port !== undefined) await ensurePortFree(port);
  // A plane on this machine may push to receivers on loopback (src/core/push-target.ts).
  vars = { PUSH_HOSTS: 'local', ...vars };
  if (migrate && first) await applyMigrations({ node, env, persistTo, shards });
  const config = configFor(persistTo, shards);
  port ??= await freePort();
  let args;
  if (server === 'wrangler') {
    const inspector = await freePort();
    args = [
      wrangler,
      'dev',
      '--config',
      config,
      '--ip',
      '127.0.0.1',
      '--port',
      String(port),
      '--inspector-ip',
      '127.0.0.1',
      '--inspector-port',
      String(inspector),
      '--persist-to',
      persistTo,
      '--log-level',
      log,
      '--show-interactive-dev-session=false',
    ];
  } else if (server === 'miniflare') {
    args = [
      join(ROOT, 'scripts', 'serve.mjs'),
      '--config',
      config,
      '--ip',
      '127.0.0.1',
      '--port',
      String(port),
      '--persist-to',
      persistTo,
      '--log-level',
      log,
      '--exit-with-parent',
    ];
    if (quiet) args.push('--quiet');
  } else {
    throw new Error(`unknown server ${JSON.stringify(server)}: expected 'miniflare' or 'wrangler'`);
  }
  for (const [k, v] of Object.entries(vars)) args.push('--var', `${k}:${v}`);
  // serve.mjs holds its stdin open to this process and stops when it closes: a plane never outlives
  // whoever started it, even one killed outright.
  const child = spawn(node, args, {
    cwd: ROOT,
    env: quietEnv(env),
    stdio: [server === 'miniflare' ? 'pipe' : 'ignore', stdio, stdio],
    detached: process.platform !== 'win32',
  });
  let output = '';
  if (stdio === 'pipe') {
    child.stdout.on('data', (d) => {
      output = (output + d).slice(-20000);
    });
    child.stderr.on('data', (d) => {
      output = (output + d).slice(-20000);
    });
  }
  const url = `http://127.0.0.1:${port}`;
  const stop = () => stopTree(child);
  const kill = () => killTree(child, port);
  const deadline = Date.now() + 90_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`${server} exited with ${child.exitCode}:\n${output}`);
    try {
      const r = await fetch(`${url}/health`);
      if (r.ok) break;
    } catch {
      /* not up yet */
    }
    if (Date.now() > deadline) {
      await stop();
      throw new Error(`${server} did not answer /health within 90 s:\n${output}`);
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  return { url, pid: child.pid, child, stop, kill, output: () => output };
}

/**
 * Kills a plane outright (SIGKILL to its process group: a crash, nothing shuts down) and resolves
 * once its port is free again, so that a plane can be started again on it. The direct child's exit
 * is not enough: workerd, its child, may hold the port for a moment after it.
 */
export async function killTree(child, port) {
  const exited = child.exitCode !== null || child.signalCode !== null ? null : new Promise((r) => child.once('exit', r));
  try {
    process.kill(-child.pid, 'SIGKILL');
  } catch {
    /* gone already */
  }
  await exited;
  const deadline = Date.now() + 10_000;
  while ((await portHolder(port)) !== null) {
    if (Date.now() > deadline) throw new Error(`port ${port} still held 10 s after the plane was killed`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** Stops a process we started and its process group (wrangler's workerd children), by PID. */
export async function stopTree(child) {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((r) => child.once('exit', r));
  const kill = (sig) => {
    try {
      process.kill(-child.pid, sig);
    } catch {
      try {
        child.kill(sig);
      } catch {
        /* gone */
      }
    }
  };
  kill('SIGTERM');
  const t = setTimeout(() => kill('SIGKILL'), 5000);
  await exited;
  clearTimeout(t);
}
