// `npm run deploy`: checks what a deploy to Cloudflare needs, says what is missing and how to fix
// it, then runs `wrangler deploy`. See docs/deploy.md.
//   npm run deploy [-- --check]   (--check: the checks only)    [-- --config FILE]
//
// Each check ends one of three ways: ok; MISSING (Cloudflare answered, and the thing is not
// there: the fix is named); or UNKNOWN (no answer could be had, say with no network: nothing is
// claimed either way). A deploy goes ahead only when every check is ok.
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
    timeout: 60_000,
    ...opts,
  });
/** What wrangler printed, without its colours and decorations. */
// biome-ignore lint/suspicious/noControlCharactersInRegex: it removes the terminal's colour codes (ESC [ ... m)
const said = (r) => `${r.stdout ?? ''}\n${r.stderr ?? ''}`.replace(/\x1b\[[0-9;]*m/g, '');
/** Wrangler could not reach Cloudflare at all (it exits 0 for some of these). */
const unreachable = (r) =>
  r.error !== undefined ||
  /Unable to resolve Cloudflare's API hostname|ENOTFOUND|EAI_AGAIN|ECONNREFUSED|ETIMEDOUT|fetch failed|network connection/i.test(said(r));
const lastLine = (r) =>
  said(r)
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l && !/^(⛅️|─|🪵)/.test(l))
    .find((l) => /ERROR|error/.test(l)) ?? 'no answer';

const problems = [];
let unknown = 0;
const line = (mark, what) => process.stderr.write(`  ${mark.padEnd(7)}  ${what}\n`);
/** ok: true, false (MISSING, with its fix) or null (UNKNOWN: could not check, and why). */
const say = (ok, what, fix) => {
  if (ok === null) {
    unknown++;
    line('UNKNOWN', `${what}: could not check (${fix})`);
    return;
  }
  line(ok ? 'ok' : 'MISSING', what);
  if (!ok) problems.push(fix);
};

process.stderr.write(`[lakeshore] deploy checks (${values.config})\n`);
const toml = readFileSync(values.config, 'utf8');
/** The shards: each [[d1_databases]] whose binding is DB, DB_1, DB_2, ... (src/core/shards.ts). */
const shards = [...toml.matchAll(/\[\[d1_databases\]\]([\s\S]*?)(?=\n\[|$)/g)]
  .map((m) => ({ binding: /binding\s*=\s*"([^"]+)"/.exec(m[1])?.[1] ?? '', id: /database_id\s*=\s*"([^"]*)"/.exec(m[1])?.[1] ?? '' }))
  .filter((d) => /^DB(_[1-9][0-9]*)?$/.test(d.binding));
if (!shards.some((s) => s.binding === 'DB')) shards.unshift({ binding: 'DB', id: '' });
for (const s of shards) {
  say(
    s.id !== '' && !/^0{8}-/.test(s.id),
    `a D1 database id for shard ${s.binding} in wrangler.toml`,
    s.binding === 'DB'
      ? 'create the database and put its id into wrangler.toml: npx wrangler d1 create lakeshore'
      : `create the shard's database and put its id into its [[d1_databases]] block: npx wrangler d1 create lakeshore-${s.binding.slice(3)}`,
  );
}
const bucket = /\[\[r2_buckets\]\][\s\S]*?bucket_name\s*=\s*"([^"]+)"/.exec(toml)?.[1] ?? 'lakeshore-code';

// Credentials: an API token in the environment, or a `wrangler login` on this machine, that
// Cloudflare accepts.
const loginFiles = [
  join(homedir(), '.wrangler', 'config', 'default.toml'),
  join(process.env.XDG_CONFIG_HOME ?? join(homedir(), '.config'), '.wrangler', 'config', 'default.toml'),
];
const hasCredentials =
  Boolean(process.env.CLOUDFLARE_API_TOKEN) ||
  loginFiles.some((f) => existsSync(f) && /oauth_token|api_token/.test(readFileSync(f, 'utf8')));
const loginFix =
  'log in: npx wrangler login (or export CLOUDFLARE_API_TOKEN=<a token with Workers Scripts, D1, R2 and Durable Objects edit rights>)';
let credentials = false;
if (!hasCredentials) say(false, 'Cloudflare credentials (CLOUDFLARE_API_TOKEN, or `wrangler login`)', loginFix);
else {
  const who = wrangler(['whoami']);
  if (unreachable(who)) say(null, 'Cloudflare credentials', `no answer from Cloudflare: ${lastLine(who)}`);
  else {
    credentials = /You are logged in/i.test(said(who));
    say(credentials, 'Cloudflare credentials that Cloudflare accepts', `Cloudflare refused them (${lastLine(who)}): ${loginFix}`);
  }
}

if (credentials) {
  for (const s of shards.filter((x) => x.id && !/^0{8}-/.test(x.id))) {
    const pending = wrangler(['d1', 'migrations', 'list', s.binding, '--remote']);
    if (unreachable(pending) || pending.status !== 0) say(null, `remote D1 migrations applied to ${s.binding}`, lastLine(pending));
    else
      say(
        /No migrations to apply/i.test(said(pending)),
        `remote D1 migrations applied to ${s.binding}`,
        `apply the pending migrations first: npx wrangler d1 migrations apply ${s.binding} --remote`,
      );
  }
  const buckets = wrangler(['r2', 'bucket', 'list']);
  if (unreachable(buckets) || buckets.status !== 0) say(null, `the R2 bucket ${bucket}`, lastLine(buckets));
  else
    say(new RegExp(`\\b${bucket}\\b`).test(said(buckets)), `the R2 bucket ${bucket}`, `create it: npx wrangler r2 bucket create ${bucket}`);
  const secrets = wrangler(['secret', 'list']);
  if (unreachable(secrets)) say(null, 'the root token secret LAKESHORE_TOKEN', lastLine(secrets));
  else
    say(
      secrets.status === 0 && said(secrets).includes('LAKESHORE_TOKEN'),
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

if (problems.length || unknown) {
  const todo = problems.map((p, i) => `  ${i + 1}. ${p}`).join('\n');
  process.stderr.write(
    `\n[lakeshore] not deployed.${todo ? ` To do first:\n${todo}` : ''}${unknown ? `\n  ${unknown} check(s) could not be made: run again where Cloudflare can be reached` : ''}\n  (docs/deploy.md has the whole guide)\n`,
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
