/**
 * pushCode (docs/code-mount.md): the current git tree, archived and uploaded once per tree, its
 * stamp (the tree hash) answered. Node only (it runs git); the module loads child_process when
 * called, so the client stays usable in browsers and Workers.
 *
 * A working tree with changes to tracked files is refused (push_code sends HEAD's tree, and a job
 * must not run code that no commit holds): commit first. Untracked files are not in the tree and
 * do not count. The plane is asked first (HEAD); the archive goes up only when it lacks that stamp.
 */
import { BadRequestError, errorFor } from '../errors.ts';
import { nodeBuiltin } from '../node-builtin.ts';
import type { Transport } from './transport.ts';
import { errorOf } from './transport.ts';

export interface PushedCode {
  /** The tree hash: what the envelope's `code` field carries. */
  stamp: string;
  /** False when the plane already had it (nothing was uploaded). */
  uploaded: boolean;
  bytes: number | null;
}

async function git(cwd: string, args: string[]): Promise<Buffer> {
  const { execFile } = await nodeBuiltin<typeof import('node:child_process')>('node:child_process');
  return new Promise((resolve, reject) => {
    execFile('git', args, { cwd, encoding: 'buffer', maxBuffer: 256 << 20 }, (err, stdout, stderr) => {
      if (err) reject(new BadRequestError(`git ${args.join(' ')} failed in ${cwd}: ${String(stderr).trim() || err.message}`));
      else resolve(stdout);
    });
  });
}

export async function pushCode(http: Transport, cwd: string): Promise<PushedCode> {
  // Each porcelain line is "XY PATH": two status columns (either may be a space), then the path.
  // Trimming the whole output would eat the first line's leading blank column and a path letter.
  const dirty = (await git(cwd, ['status', '--porcelain', '--untracked-files=no']))
    .toString()
    .split('\n')
    .filter((line) => line.trim());
  if (dirty.length) {
    throw new BadRequestError(
      `the working tree has changes not committed (${dirty.length} file(s), e.g. ${dirty[0]!.slice(3)}): pushCode sends HEAD's tree; commit them first`,
    );
  }
  const stamp = (await git(cwd, ['rev-parse', 'HEAD^{tree}'])).toString().trim();
  const head = await http.fetch(`/code/${stamp}`, { method: 'HEAD' });
  if (head.ok) return { stamp, uploaded: false, bytes: Number(head.headers.get('content-length')) };
  if (head.status !== 404)
    throw errorFor(
      head.status === 403 ? 'forbidden' : head.status === 401 ? 'unauthorized' : 'internal',
      `HEAD /code/${stamp} answered ${head.status}`,
    );
  const tar = await git(cwd, ['archive', '--format=tar', stamp]);
  const { createHash } = await nodeBuiltin<typeof import('node:crypto')>('node:crypto');
  const digest = createHash('sha256').update(tar).digest('base64');
  const res = await http.fetch(`/code/${stamp}`, {
    method: 'PUT',
    body: new Uint8Array(tar),
    headers: { 'content-type': 'application/x-tar', 'content-digest': `sha-256=:${digest}:` },
  });
  if (!res.ok) throw await errorOf(res);
  return { stamp, uploaded: true, bytes: tar.length };
}

/** A stamp's archive and the SHA-256 (hex) the plane keeps for it (GET /code/:stamp, a worker token). */
export async function fetchCode(http: Transport, stamp: string): Promise<{ bytes: Uint8Array; sha256: string | null }> {
  const res = await http.fetch(`/code/${stamp}`, { method: 'GET' });
  if (!res.ok) throw await errorOf(res);
  const named = /sha-256=:([A-Za-z0-9+/]+={0,2}):/.exec(res.headers.get('content-digest') ?? '')?.[1];
  const sha256 = named ? [...atob(named)].map((c) => c.charCodeAt(0).toString(16).padStart(2, '0')).join('') : null;
  return { bytes: new Uint8Array(await res.arrayBuffer()), sha256 };
}
