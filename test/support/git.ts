/** A git repository for tests of pushed code: `git(...)` in it, with an identity and no signing. */
import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { tempDir } from './tmp.ts';

export const git = (cwd: string, ...args: string[]) =>
  execFileSync('git', ['-c', 'user.email=t@example.com', '-c', 'user.name=t', '-c', 'commit.gpgsign=false', ...args], { cwd })
    .toString()
    .trim();

/** A fresh repository whose first commit holds `files` (path -> text). */
export function repoWith(files: Record<string, string>): string {
  const repo = tempDir('lakeshore-repo-');
  git(repo, 'init', '-q');
  for (const [path, text] of Object.entries(files)) writeFileSync(join(repo, path), text);
  git(repo, 'add', '.');
  git(repo, 'commit', '-qm', 'one');
  return repo;
}
