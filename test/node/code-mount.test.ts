/**
 * Pushed code, end to end against the test's wrangler dev (docs/code-mount.md): a producer in a
 * git repository submits a job naming `tasks.mjs#train` at its tree's stamp; a worker started in an
 * empty directory with `--code mount` runs it from that tree; a new commit runs the new code while
 * a job at the old stamp still runs the old one; a worker without the flag refuses the job;
 * hostile archives are refused with nothing written outside the cache's temporary directory; two
 * worker processes mounting one stamp at once both get it, as one tree; an archive that is not the
 * git tree its stamp names is refused.
 */
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, readdirSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { inject } from 'vitest';
import { HttpDispatch, Queue } from '../../client/local/index.ts';
import { Mounts, MountError, MOUNT_MAX_ENTRIES } from '../../client/worker/mount.ts';
import { cli, planeEnv } from './setup/cli.ts';
import { freshNs } from './setup/client.ts';
import { tarOf, type TarEntry } from './setup/tar.ts';
import { tempDir } from '../support/tmp.ts';
import { git, repoWith } from '../support/git.ts';
import { createHash } from 'node:crypto';

const plane = (ns: string) => new HttpDispatch(inject('planeUrl'), { token: inject('planeToken'), namespace: ns });

async function put(ns: string, stamp: string, tar: Uint8Array) {
  const res = await fetch(`${inject('planeUrl')}/v1/ns/${ns}/code/${stamp}`, {
    method: 'PUT',
    body: Buffer.from(tar),
    headers: {
      authorization: `Bearer ${inject('planeToken')}`,
      'content-digest': `sha-256=:${createHash('sha256').update(tar).digest('base64')}:`,
    },
  });
  expect(res.status).toBe(201);
}

describe('pushed code', () => {
  it("a worker in an empty directory runs the producer's code at each job's stamp; one without --code mount refuses it", async () => {
    const repo = repoWith({ 'tasks.mjs': "export function train(x) { return 'v1:' + x; }\n" });
    const env = planeEnv('edge');
    const ns = env.LAKESHORE_NAMESPACE!;
    const d = plane(ns);
    const q = new Queue('mq', { dispatch: d });
    const old = await q.submitWith<string>({ code: 'push', codeDir: repo, module: 'tasks.mjs#train' }, 'train', 5);
    const first = git(repo, 'rev-parse', 'HEAD^{tree}');
    // A worker with no copy of the code: an empty directory, its own LAKESHORE_HOME.
    const empty = tempDir('lakeshore-emptywd-');
    const home = tempDir('lakeshore-home-');
    const work = () => cli(['worker', 'once', '--queue', 'mq', '--code', 'mount'], { ...env, LAKESHORE_HOME: home }, empty);
    expect((await work()).code).toBe(0);
    expect(await old.result({ timeoutMs: 20_000 })).toBe('v1:5');
    // A second commit changes the function: new submits run the new code, the old stamp the old.
    writeFileSync(join(repo, 'tasks.mjs'), "export function train(x) { return 'v2:' + x; }\n");
    git(repo, 'commit', '-qam', 'two');
    const fresh = await q.submitWith<string>({ code: 'push', codeDir: repo, module: 'tasks.mjs#train' }, 'train', 6);
    const stale = await q.submitWith<string>({ code: first, module: 'tasks.mjs#train' }, 'train', 7);
    expect((await work()).code).toBe(0);
    expect((await work()).code).toBe(0);
    expect(await fresh.result({ timeoutMs: 20_000 })).toBe('v2:6');
    expect(await stale.result({ timeoutMs: 20_000 })).toBe('v1:7');
    const mounted = readdirSync(join(home, 'code'));
    expect(mounted.filter((n) => n.startsWith('.'))).toEqual([]);
    expect(mounted).toHaveLength(2);
    // Without --code mount, a job carrying pushed code fails at once, saying why, with an ERROR frame.
    const refused = await q.submitWith<string>({ code: 'push', codeDir: repo, module: 'tasks.mjs#train' }, 'train', 8);
    expect((await cli(['worker', 'once', '--runtime', 'node', '--queue', 'mq'], { ...env, LAKESHORE_HOME: home })).code).toBe(0);
    const err = await refused.result({ timeoutMs: 20_000 }).then(
      () => null,
      (e: Error) => e,
    );
    expect(err?.message).toContain('does not run pushed code');
    const frames = await d.journalPage(refused.id);
    expect(frames.frames.map((f) => f.kind)).toContain(4);
    expect((await d.get(refused.id))!.attempt).toBe(1);
    await d.close();
  }, 90_000);

  it('refuses hostile archives and a digest that does not match, writing nothing outside its temporary directory', async () => {
    const ns = freshNs();
    const d = plane(ns);
    const outside = tempDir('lakeshore-outside-');
    const hostile: [string, TarEntry[], RegExp][] = [
      ['absolute path', [{ name: `${outside}/pwned`, body: 'x' }], /outside the mount/],
      ['.. escape', [{ name: '../../escape.txt', body: 'x' }], /outside the mount/],
      [
        'symlink out',
        [
          { name: 'ok.txt', body: 'x' },
          { name: 'link', type: '2', linkname: '../../../etc' },
        ],
        /points outside the mount/,
      ],
      ['hard link out', [{ name: 'hard', type: '1', linkname: '/etc/passwd' }], /points outside the mount|outside the mount/],
      ['device file', [{ name: 'dev', type: '3' }], /CharacterDevice/],
      ['too many entries', Array.from({ length: MOUNT_MAX_ENTRIES + 1 }, (_, i) => ({ name: `f${i}`, body: '' })), /entries/],
    ];
    for (const [i, [what, entries, why]] of hostile.entries()) {
      const stamp = String(i).repeat(40);
      await put(ns, stamp, tarOf(entries));
      const home = tempDir('lakeshore-codehome-');
      const err = await new Mounts((s) => d.fetchCode(s), home).mount(stamp).then(
        () => null,
        (e: unknown) => e,
      );
      expect(err, what).toBeInstanceOf(MountError);
      expect((err as Error).message, what).toMatch(why);
      expect(existsSync(home) ? readdirSync(home) : [], what).toEqual([]);
    }
    expect(readdirSync(outside)).toEqual([]);
    // A good archive whose bytes changed on the way: refused by its digest, before it is read.
    const repo = repoWith({ 'tasks.mjs': 'export const f = () => 1;\n' });
    const stamp = git(repo, 'rev-parse', 'HEAD^{tree}');
    const good = new Uint8Array(execFileSync('git', ['archive', '--format=tar', stamp], { cwd: repo }));
    await put(ns, stamp, good);
    const home = tempDir('lakeshore-codehome-');
    const corrupt = new Mounts(async (s) => {
      const a = await d.fetchCode(s);
      a.bytes[600] = a.bytes[600]! ^ 1;
      return a;
    }, home);
    await expect(corrupt.mount(stamp)).rejects.toThrow(/SHA-256/);
    expect(existsSync(home) ? readdirSync(home) : []).toEqual([]);
    // A sound archive under a stamp that is not its tree: refused once unpacked, the unpacking removed.
    await put(ns, '9'.repeat(40), good);
    await expect(new Mounts((s) => d.fetchCode(s), home).mount('9'.repeat(40))).rejects.toThrow(/is the git tree .* not 9{40}/);
    expect(existsSync(home) ? readdirSync(home) : []).toEqual([]);
    // The same archive, fetched whole under its own stamp, mounts.
    expect(existsSync(join(await new Mounts((s) => d.fetchCode(s), home).mount(stamp), 'tasks.mjs'))).toBe(true);
    await d.close();
  }, 90_000);

  it('two worker processes mounting one stamp at once both get it, as one tree', async () => {
    const ns = freshNs();
    const repo = repoWith(Object.fromEntries(Array.from({ length: 300 }, (_, i) => [`m${i}.mjs`, `export const v = ${i};\n`.repeat(50)])));
    const stamp = git(repo, 'rev-parse', 'HEAD^{tree}');
    await put(ns, stamp, new Uint8Array(execFileSync('git', ['archive', '--format=tar', stamp], { cwd: repo })));
    const home = tempDir('lakeshore-codehome-');
    const script = resolve(import.meta.dirname, 'setup', 'mount-once.ts');
    const one = () =>
      new Promise<string>((ok, fail) => {
        const p = spawn(
          process.execPath,
          ['--experimental-strip-types', '--no-warnings', script, inject('planeUrl'), inject('planeToken'), ns, home, stamp],
          { stdio: ['ignore', 'pipe', 'inherit'] },
        );
        let out = '';
        p.stdout.on('data', (b) => (out += b));
        p.on('exit', (c) => (c === 0 ? ok(out.trim()) : fail(new Error(`mount-once exited ${c}`))));
      });
    const [a, b] = await Promise.all([one(), one()]);
    expect(a).toBe(b);
    expect(readdirSync(home)).toEqual([stamp]);
    expect(readdirSync(a)).toHaveLength(300);
  }, 60_000);
});
