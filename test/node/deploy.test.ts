/**
 * `npm run deploy` says what a deploy still needs before it tries (these machines have no
 * network, so the remote checks are seen failing with the fix they name, never passing).
 */
import { spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { tempDir } from '../support/tmp.ts';

const ROOT = resolve(import.meta.dirname, '..', '..');
const check = (env: NodeJS.ProcessEnv, ...args: string[]) =>
  spawnSync(process.execPath, [join(ROOT, 'scripts', 'deploy.mjs'), '--check', ...args], {
    cwd: ROOT,
    env: { ...process.env, ...env },
    encoding: 'utf8',
    timeout: 120_000,
  });

describe('npm run deploy', () => {
  it('with the placeholder database id and no credentials: lists both fixes and deploys nothing', () => {
    const r = check({ HOME: tempDir('lakeshore-home-'), XDG_CONFIG_HOME: '', CLOUDFLARE_API_TOKEN: '' });
    expect(r.status).toBe(1);
    expect(r.stderr).toContain('MISSING  a D1 database id in wrangler.toml');
    expect(r.stderr).toContain('npx wrangler d1 create lakeshore');
    expect(r.stderr).toContain('npx wrangler login');
    expect(r.stderr).toMatch(/ok {3}the bundle builds \(\d+ KiB/);
  });

  it('with an id and a token it asks Cloudflare about migrations and the token secret, and says what it could not learn', () => {
    const config = join(tempDir('lakeshore-deploy-'), 'wrangler.toml');
    const toml = readFileSync(join(ROOT, 'wrangler.toml'), 'utf8').replace(
      /database_id = "[^"]*"/,
      'database_id = "6f1c2a4e-1111-4222-8333-944455556666"',
    );
    writeFileSync(
      config,
      toml
        .replace('main = "src/worker/index.ts"', `main = "${join(ROOT, 'src', 'worker', 'index.ts')}"`)
        .replace('migrations_dir = "migrations"', `migrations_dir = "${join(ROOT, 'migrations')}"`),
    );
    const r = check({ HOME: tempDir('lakeshore-home-'), CLOUDFLARE_API_TOKEN: 'not-a-real-token' }, '--config', config);
    expect(r.status).toBe(1);
    expect(r.stderr).toContain('ok   a D1 database id in wrangler.toml');
    expect(r.stderr).toContain('MISSING  remote D1 migrations applied');
    expect(r.stderr).toContain('MISSING  the root token secret LAKESHORE_TOKEN');
    expect(r.stderr).toContain('npx wrangler secret put LAKESHORE_TOKEN');
  });
});
