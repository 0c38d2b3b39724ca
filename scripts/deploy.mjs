// `npm run deploy`: checks what a deploy to Cloudflare needs, says what is missing and how to fix
// it, then runs `wrangler deploy`. See docs/deploy.md.
//   npm run deploy [-- --check]   (--check: the checks only)    [-- --config FILE]
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { quietEnv } from './plane.mjs';
import { ROOT } from './toolchain.mjs';

const { values } = parseArgs({
  options: { check: { type: 'boolean', default: false }, config: { type: 'string', default: join(ROOT, 'wrangler.toml') } },
});
const wrangler = (args, opts = {}) =>
  spawnSync(process.execPath, [join(ROOT, 'node_modules', 'wrangler', 'bin', 'wrangler.js'), ...args, '--config', values.config], {
    cwd: ROOT,
    env: quietEnv({ ...process.env, WRANGLER_LOG: 'error' }),
    encoding: 'utf8',
    ...opts,
  });
const problems = [];
const say = (ok, what, fix) => {
  process.stderr.write(`  ${ok ? 'ok ' : 'MISSING'}  ${what}\n`);
  if (!ok) problems.push(fix);
};

process.stderr.write(`[lakeshore] deploy checks (${values.config})\n`);
const toml = readFileSync(values.config, 'utf8');
const dbId = /database_id\s*=\s*"([^"]*)"/.exec(toml)?.[1] ?? '';
say(
  dbId !== '' && !/^0{8}-/.test(dbId),
  'a D1 database id in wrangler.toml',
  'create the database and put its id into wrangler.toml: npx wrangler d1 create lakeshore',
);

// Credentials: an API token in the environment, or a `wrangler login` on this machine.
const loginFiles = [
  join(homedir(), '.wrangler', 'config', 'default.toml'),
  join(process.env.XDG_CONFIG_HOME ?? join(homedir(), '.config'), '.wrangler', 'config', 'default.toml'),
];
const loggedIn =
  Boolean(process.env.CLOUDFLARE_API_TOKEN) ||
  loginFiles.some((f) => existsSync(f) && /oauth_token|api_token/.test(readFileSync(f, 'utf8')));
say(
  loggedIn,
  'Cloudflare credentials (CLOUDFLARE_API_TOKEN, or `wrangler login`)',
  'log in: npx wrangler login (or export CLOUDFLARE_API_TOKEN=<a token with Workers, D1 and Durable Objects edit rights>)',
);

if (loggedIn && !problems.length) {
  const pending = wrangler(['d1', 'migrations', 'list', 'DB', '--remote']);
  const clean = pending.status === 0 && /No migrations to apply/i.test(pending.stdout + pending.stderr);
  say(
    clean,
    'remote D1 migrations applied',
    pending.status === 0
      ? 'apply the pending migrations first: npx wrangler d1 migrations apply DB --remote'
      : `could not list the remote migrations: ${(pending.stderr || pending.stdout).trim().split('\n').pop()}`,
  );
  const secrets = wrangler(['secret', 'list']);
  const hasToken = secrets.status === 0 && secrets.stdout.includes('LAKESHORE_TOKEN');
  say(
    hasToken,
    'the root token secret LAKESHORE_TOKEN',
    secrets.status === 0
      ? 'set it (a long random string; keep it out of the repo): npx wrangler secret put LAKESHORE_TOKEN'
      : `could not list the Worker's secrets (a first deploy has none yet): npx wrangler secret put LAKESHORE_TOKEN`,
  );
}

const bundle = spawnSync(process.execPath, [join(ROOT, 'scripts', 'bundle.mjs')], { cwd: ROOT, encoding: 'utf8' });
say(
  bundle.status === 0,
  `the bundle builds (${(bundle.stdout.match(/\d+ KiB \(\d+ KiB gzipped\)/) ?? ['?'])[0]})`,
  `fix the build: ${bundle.stderr.trim()}`,
);

if (problems.length) {
  process.stderr.write(
    `\n[lakeshore] not deployed. To do first:\n${problems.map((p, i) => `  ${i + 1}. ${p}`).join('\n')}\n  (docs/deploy.md has the whole guide)\n`,
  );
  process.exit(1);
}
if (values.check) {
  process.stderr.write('[lakeshore] ready to deploy\n');
  process.exit(0);
}
execFileSync(process.execPath, [join(ROOT, 'node_modules', 'wrangler', 'bin', 'wrangler.js'), 'deploy', '--config', values.config], {
  cwd: ROOT,
  stdio: 'inherit',
  env: { ...process.env, WRANGLER_SEND_METRICS: 'false' },
});
