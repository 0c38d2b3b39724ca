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
    expect(r.stderr).toContain('MISSING  a D1 database id for shard DB in wrangler.toml');
    expect(r.stderr).toContain('npx wrangler d1 create lakeshore');
    expect(r.stderr).toContain('npx wrangler login');
    expect(r.stderr).toContain('R2');
    expect(r.stderr).toMatch(/ok {7}the bundle builds \(\d+ KiB/);
  });

  it('with ids for three shards and a token Cloudflare cannot be asked about (no network): says it could not check, claims nothing, deploys nothing', () => {
    const dir = tempDir('lakeshore-deploy-');
    const config = join(dir, 'wrangler.toml');
    const ids = ['6f1c2a4e-1111-4222-8333-944455556666', '6f1c2a4e-1111-4222-8333-944455556667', ''];
    const shard = (b: string, id: string) =>
      `\n[[d1_databases]]\nbinding = "${b}"\ndatabase_name = "lakeshore-${b}"\ndatabase_id = "${id}"\nmigrations_dir = "${join(ROOT, 'migrations')}"\n`;
    const toml = readFileSync(join(ROOT, 'wrangler.toml'), 'utf8').replace(/database_id = "[^"]*"/, `database_id = "${ids[0]}"`);
    writeFileSync(
      config,
      toml
        .replace('main = "src/worker/index.ts"', `main = "${join(ROOT, 'src', 'worker', 'index.ts')}"`)
        .replace('migrations_dir = "migrations"', `migrations_dir = "${join(ROOT, 'migrations')}"`) +
        shard('DB_1', ids[1]!) +
        shard('DB_2', ids[2]!),
    );
    const r = check({ HOME: tempDir('lakeshore-home-'), CLOUDFLARE_API_TOKEN: 'not-a-real-token' }, '--config', config);
    expect(r.status).toBe(1);
    expect(r.stderr).toContain('ok       a D1 database id for shard DB in wrangler.toml');
    expect(r.stderr).toContain('ok       a D1 database id for shard DB_1 in wrangler.toml');
    expect(r.stderr).toContain('MISSING  a D1 database id for shard DB_2 in wrangler.toml');
    expect(r.stderr).toContain('npx wrangler d1 create lakeshore-2');
    // A token it could not show to Cloudflare is neither ok nor missing.
    expect(r.stderr).toMatch(/UNKNOWN {2}Cloudflare credentials: could not check \(no answer from Cloudflare/);
    expect(r.stderr).not.toMatch(/ok +Cloudflare credentials/);
    expect(r.stderr).toContain('could not be made: run again where Cloudflare can be reached');
  });
});
