/**
 * Mounted code (docs/code-mount.md): a worker that accepts pushed code fetches a stamp's archive
 * once, checks it, and unpacks it into `$LAKESHORE_HOME/code/<stamp>`, from where the job's module
 * is imported. Node only.
 *
 * An archive is hostile input. Before anything is written, every entry is checked: no absolute
 * path, no `..`, no symbolic or hard link pointing out of the mount, no device file or FIFO, at
 * most MOUNT_MAX_ENTRIES entries and MOUNT_MAX_UNPACKED bytes, and the archive's SHA-256 must be
 * the one the plane keeps for it. A refused archive writes nothing outside a temporary directory
 * of the cache, which is removed. The unpacking goes into a temporary directory, then one rename
 * makes it the mount: two jobs or two worker processes never see half a tree, and when two unpack
 * the same stamp at once, one rename wins and the other's copy is removed. The cache keeps the
 * MOUNT_CACHE most recently used stamps.
 */
import { createHash } from 'node:crypto';
import { mkdir, mkdtemp, readdir, rename, rm, stat, utimes } from 'node:fs/promises';
import { join, posix } from 'node:path';
import * as tar from 'tar';
import { treeHashHex } from './tree-hash.ts';

export const MOUNT_MAX_BYTES = 64 << 20;
export const MOUNT_MAX_UNPACKED = 256 << 20;
export const MOUNT_MAX_ENTRIES = 10_000;
export const MOUNT_CACHE = 16;
const STAMP = /^(?:[0-9a-f]{40}|[0-9a-f]{64})$/;
const KINDS = new Set(['File', 'OldFile', 'ContiguousFile', 'Directory', 'SymbolicLink', 'Link']);

export class MountError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'MountError';
  }
}

/** What a stamp's archive is: its bytes and the SHA-256 (hex) the plane keeps for it. */
export type FetchArchive = (stamp: string) => Promise<{ bytes: Uint8Array; sha256: string | null }>;

const escapes = (p: string) => p.startsWith('/') || /^[A-Za-z]:/.test(p) || p.split('/').includes('..');

/** Every entry's header, checked before anything is written; the first problem is thrown. */
export async function checkArchive(bytes: Uint8Array): Promise<void> {
  let entries = 0;
  let unpacked = 0;
  let problem: string | null = null;
  const note = (p: string) => (problem ??= p);
  const parser = tar.t({
    onReadEntry: (e) => {
      entries++;
      unpacked += e.size ?? 0;
      const path = e.path;
      if (!KINDS.has(e.type))
        note(`entry ${JSON.stringify(path)} is a ${e.type}: an archive of code holds files, directories and links only`);
      else if (escapes(path)) note(`entry ${JSON.stringify(path)} would be written outside the mount`);
      else if (e.type === 'SymbolicLink' || e.type === 'Link') {
        const to = e.linkpath ?? '';
        // A symbolic link is relative to its own directory; a hard link names a path of the archive.
        const target = e.type === 'SymbolicLink' && !to.startsWith('/') ? posix.normalize(posix.join(posix.dirname(path), to)) : to;
        if (escapes(target) || target.startsWith('../') || target === '..')
          note(`link ${JSON.stringify(path)} points outside the mount (${JSON.stringify(to)})`);
      }
      e.resume();
    },
  });
  await new Promise<void>((ok, fail) => {
    parser.on('end', ok);
    parser.on('close', ok);
    parser.on('error', (err: Error) => fail(new MountError(`not a tar archive: ${err.message}`)));
    parser.end(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength));
  });
  if (entries > MOUNT_MAX_ENTRIES) throw new MountError(`the archive holds ${entries} entries; a mount takes at most ${MOUNT_MAX_ENTRIES}`);
  if (unpacked > MOUNT_MAX_UNPACKED)
    throw new MountError(`the archive unpacks to ${unpacked} bytes; a mount takes at most ${MOUNT_MAX_UNPACKED}`);
  if (problem) throw new MountError(problem);
}

/** The code cache of one worker process: `home` is `$LAKESHORE_HOME/code`. */
export class Mounts {
  private readonly inflight = new Map<string, Promise<string>>();
  private readonly fetchArchive: FetchArchive;
  readonly home: string;
  private readonly keep: number;

  constructor(fetchArchive: FetchArchive, home: string, keep = MOUNT_CACHE) {
    this.fetchArchive = fetchArchive;
    this.home = home;
    this.keep = keep;
  }

  /** The directory of `stamp`'s tree, fetched and unpacked the first time. */
  mount(stamp: string): Promise<string> {
    let p = this.inflight.get(stamp);
    if (!p) {
      p = this.mountOnce(stamp).finally(() => this.inflight.delete(stamp));
      this.inflight.set(stamp, p);
    }
    return p;
  }

  private async mountOnce(stamp: string): Promise<string> {
    if (!STAMP.test(stamp)) throw new MountError(`stamp ${JSON.stringify(stamp)} is not a git tree hash`);
    const dir = join(this.home, stamp);
    // A mount that exists is whole: it only ever appears by a rename.
    if (
      await stat(dir).then(
        () => true,
        () => false,
      )
    ) {
      const now = new Date();
      await utimes(dir, now, now).catch(() => {});
      return dir;
    }
    const { bytes, sha256 } = await this.fetchArchive(stamp);
    if (bytes.length > MOUNT_MAX_BYTES)
      throw new MountError(`the archive is ${bytes.length} bytes; a mount takes at most ${MOUNT_MAX_BYTES}`);
    const got = createHash('sha256').update(bytes).digest('hex');
    if (got !== sha256) throw new MountError(`the archive of ${stamp} has SHA-256 ${got}, not ${sha256 ?? '(none given)'}: refused`);
    await checkArchive(bytes);
    await mkdir(this.home, { recursive: true });
    const tmp = await mkdtemp(join(this.home, `.tmp-${stamp.slice(0, 12)}-`));
    try {
      const x = tar.x({ cwd: tmp, strict: true, preservePaths: false, noChmod: false });
      await new Promise<void>((ok, fail) => {
        x.on('finish', ok);
        x.on('close', ok);
        x.on('error', fail);
        x.end(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength));
      });
      // The stamp is the tree's git hash: what was unpacked must be that tree, and nothing else.
      const tree = await treeHashHex(tmp, stamp);
      if (tree !== stamp) throw new MountError(`the archive is the git tree ${tree}, not ${stamp}: refused`);
      await rename(tmp, dir).catch(async (e: NodeJS.ErrnoException) => {
        // Another process mounted it first: the same tree (the stamp is its hash). Keep theirs.
        if (e.code !== 'ENOTEMPTY' && e.code !== 'EEXIST') throw e;
        await rm(tmp, { recursive: true, force: true });
      });
    } catch (e) {
      await rm(tmp, { recursive: true, force: true });
      throw e instanceof MountError ? e : new MountError(`unpacking ${stamp} failed: ${(e as Error).message}`);
    }
    await this.evict(stamp);
    return dir;
  }

  /** Keeps the `keep` most recently used mounts (the one just made among them). */
  private async evict(current: string): Promise<void> {
    const names = (await readdir(this.home).catch(() => [] as string[])).filter((n) => STAMP.test(n) && n !== current);
    if (names.length < this.keep) return;
    const aged = await Promise.all(names.map(async (n) => ({ n, t: (await stat(join(this.home, n)).catch(() => null))?.mtimeMs ?? 0 })));
    aged.sort((a, b) => b.t - a.t);
    for (const { n } of aged.slice(this.keep - 1)) await rm(join(this.home, n), { recursive: true, force: true });
  }
}
