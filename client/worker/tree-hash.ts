/**
 * The git tree hash of a directory as `git archive` unpacked it: what a mount is checked against
 * (its stamp), so a worker runs exactly the tree the producer's commit holds. Files are blobs (mode
 * 100644, or 100755 when executable), symbolic links blobs of their target (120000), directories
 * trees (40000; an empty one is not in a git tree). SHA-1, or SHA-256 for a 64-digit stamp.
 */
import { createHash } from 'node:crypto';
import { lstat, readdir, readFile, readlink } from 'node:fs/promises';
import { join } from 'node:path';

type Algo = 'sha1' | 'sha256';

const object = (algo: Algo, kind: string, body: Buffer) => createHash(algo).update(`${kind} ${body.length}\0`).update(body).digest();

/** The tree hash of `dir`, or null for a tree with nothing in it (git keeps no empty trees). */
export async function treeHash(dir: string, algo: Algo): Promise<Buffer | null> {
  const entries: { name: string; mode: string; id: Buffer; sortKey: string }[] = [];
  for (const name of await readdir(dir)) {
    const path = join(dir, name);
    const st = await lstat(path);
    if (st.isDirectory()) {
      const id = await treeHash(path, algo);
      if (id) entries.push({ name, mode: '40000', id, sortKey: `${name}/` });
    } else if (st.isSymbolicLink()) {
      entries.push({ name, mode: '120000', id: object(algo, 'blob', Buffer.from(await readlink(path))), sortKey: name });
    } else if (st.isFile()) {
      entries.push({ name, mode: st.mode & 0o111 ? '100755' : '100644', id: object(algo, 'blob', await readFile(path)), sortKey: name });
    }
  }
  if (!entries.length) return null;
  // Git orders a tree's entries by name, a directory's name taken with a trailing slash.
  entries.sort((a, b) => Buffer.compare(Buffer.from(a.sortKey), Buffer.from(b.sortKey)));
  return object(algo, 'tree', Buffer.concat(entries.map((e) => Buffer.concat([Buffer.from(`${e.mode} ${e.name}\0`), e.id]))));
}

export async function treeHashHex(dir: string, stamp: string): Promise<string> {
  const id = await treeHash(dir, stamp.length === 64 ? 'sha256' : 'sha1');
  // The empty tree's well-known hash, for a tree with nothing in it.
  return id ? id.toString('hex') : object(stamp.length === 64 ? 'sha256' : 'sha1', 'tree', Buffer.alloc(0)).toString('hex');
}
