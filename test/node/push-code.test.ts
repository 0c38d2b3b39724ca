/**
 * pushCode (client/http/code.ts) against the test's wrangler dev, from a real git repository: the
 * tree is pushed once (a second push of the same tree only asks), a new commit is a new stamp, a
 * tree with uncommitted changes is refused, and a worker token fetches exactly what was pushed.
 */
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { inject } from 'vitest';
import { describe, expect, it } from 'vitest';
import { BadRequestError, HttpDispatch } from '../../client/local/index.ts';
import { freshNs } from './setup/client.ts';
import { git, repoWith } from '../support/git.ts';

describe('pushCode', () => {
  it('pushes a git tree once per tree, answers its stamp, refuses uncommitted changes; a worker fetches what was pushed', async () => {
    const repo = repoWith({ 'tasks.mjs': 'export const train = (x) => x * 2;\n' });
    const uploads: string[] = [];
    const bodies: Buffer[] = [];
    const ns = freshNs();
    const d = new HttpDispatch(inject('planeUrl'), {
      token: inject('planeToken'),
      namespace: ns,
      fetch: (url, init) => {
        if (init?.method === 'PUT' && String(url).includes('/code/')) {
          uploads.push(String(url));
          bodies.push(Buffer.from(init.body as Uint8Array));
        }
        return fetch(url, init);
      },
    });
    const first = await d.pushCode({ cwd: repo });
    expect(first.stamp).toBe(git(repo, 'rev-parse', 'HEAD^{tree}'));
    expect(first.uploaded).toBe(true);
    const again = await d.pushCode({ cwd: repo });
    expect(again).toMatchObject({ stamp: first.stamp, uploaded: false });
    expect(uploads).toHaveLength(1);
    // What went up is the archive of that tree (an archive of a tree carries the time it was made
    // as its files' mtime, so compare the files), and a worker fetches exactly what went up.
    const files = (tar: Buffer) => [
      execFileSync('tar', ['-t'], { input: tar }).toString(),
      execFileSync('tar', ['-xO'], { input: tar }).toString(),
    ];
    expect(files(bodies[0]!)).toEqual(files(execFileSync('git', ['archive', '--format=tar', first.stamp], { cwd: repo })));
    const worker = await d.createToken('worker');
    const res = await fetch(`${inject('planeUrl')}/v1/ns/${ns}/code/${first.stamp}`, {
      headers: { authorization: `Bearer ${worker.token}` },
    });
    const tar = Buffer.from(await res.arrayBuffer());
    expect(tar.equals(bodies[0]!)).toBe(true);
    expect(res.headers.get('content-digest')).toBe(`sha-256=:${createHash('sha256').update(tar).digest('base64')}:`);
    // Uncommitted changes to tracked files are refused; untracked files do not count.
    writeFileSync(join(repo, 'notes.txt'), 'untracked\n');
    expect((await d.pushCode({ cwd: repo })).uploaded).toBe(false);
    writeFileSync(join(repo, 'tasks.mjs'), 'export const train = (x) => x * 3;\n');
    const dirty = await d.pushCode({ cwd: repo }).then(
      () => null,
      (e: unknown) => e,
    );
    expect(dirty).toBeInstanceOf(BadRequestError);
    expect((dirty as Error).message).toContain('commit them first');
    // The file is named whole (git's porcelain line for it starts with a blank status column).
    expect((dirty as Error).message).toContain('(1 file(s), e.g. tasks.mjs)');
    // Committed, it is a new tree: a new stamp, a second upload.
    git(repo, 'commit', '-qam', 'two');
    const second = await d.pushCode({ cwd: repo });
    expect(second.stamp).not.toBe(first.stamp);
    expect(second.uploaded).toBe(true);
    expect(uploads).toHaveLength(2);
    await d.close();
  }, 60_000);
});
