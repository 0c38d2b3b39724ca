/**
 * Moving a namespace off a full shard (docs/deploy.md, "When to add one"): a plane of its own
 * (scripts/serve.mjs, two shards) whose shards have a small storage budget. Its queue object
 * knew the shard it left was past its high-water mark, and refused submits for it; once moved, it
 * takes them at once, on the shard it moved to, while the namespace left behind is still refused.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { HttpDispatch, StorageFullError } from '../../client/local/index.ts';
import { newToken, startPlane } from '../../scripts/plane.mjs';

const MIB = 1 << 20;
const dir = mkdtempSync(join(tmpdir(), 'lakeshore-move-full-'));
const token = newToken('lsk_movefull_');
let plane: Awaited<ReturnType<typeof startPlane>>;
const open = (namespace: string) => new HttpDispatch(plane.url, { token, namespace });

beforeAll(async () => {
  // 8 MiB with the mark at 40 %: about 3.2 MiB, a few 400 KiB envelopes past an empty shard.
  plane = await startPlane({
    node: process.execPath,
    env: process.env,
    persistTo: dir,
    quiet: true,
    shards: 2,
    vars: { LAKESHORE_TOKEN: token, STORAGE_LIMIT_BYTES: String(8 * MIB), STORAGE_HIGH_WATER_PERCENT: '40' },
  });
}, 120_000);

afterAll(async () => {
  await plane?.stop();
  rmSync(dir, { recursive: true, force: true });
});

it('a namespace moved off a full shard takes submits at once on the one it moved to', async () => {
  const small = open('small');
  const heavy = open('heavy');
  try {
    await small.submit('q', new TextEncoder().encode('x'), { id: 'first' });
    await heavy.submit('q', new TextEncoder().encode('x'), { id: 'first' });
    // Both on one shard: the heavy one's.
    const full = (await heavy.storage()).shard;
    const other = full === 'DB' ? 'DB_1' : 'DB';
    if ((await small.storage()).shard !== full) expect((await small.moveNamespace(full, { waitMs: 1_000 })).state).toBe('moved');
    // The heavy namespace fills the shard past its mark.
    const big = new Uint8Array(400 << 10).fill(7);
    let refused: unknown = null;
    for (let i = 0; i < 40 && !refused; i++) await heavy.submit('q', big, { id: `big${i}` }).catch((e) => (refused = e));
    expect(refused, 'the heavy namespace refused past the mark').toBeInstanceOf(StorageFullError);
    // The small one's object learns it from its own next batch (a claim goes on when full), and refuses its submits too.
    expect((await small.claimMany('q', 'w', 1)).map((c) => c.id)).toEqual(['first']);
    await expect(small.submit('q', new TextEncoder().encode('y'), { id: 'refused' })).rejects.toBeInstanceOf(StorageFullError);
    // Moved off it: its submits are taken at once, on the shard it moved to.
    expect((await small.moveNamespace(other, { waitMs: 1_000 })).state).toBe('moved');
    expect(await small.submit('q', new TextEncoder().encode('z'), { id: 'taken' })).toBe('taken');
    expect((await small.storage()).shard).toBe(other);
    expect((await small.get('taken'))?.state).toBe('queued');
    expect(await small.get('refused')).toBeNull();
    // The heavy namespace, left where it was, is refused still.
    await expect(heavy.submit('q', new TextEncoder().encode('y'), { id: 'still' })).rejects.toBeInstanceOf(StorageFullError);
  } finally {
    await small.close();
    await heavy.close();
  }
}, 120_000);
