/**
 * Conformance: the storage budget (docs/contract.md, "Storage"), on a plane of its own whose
 * database has a small one. Past the high-water mark new work is refused whole; what moves work
 * already there goes on, so a full database drains.
 */
import { describe, expect, it } from 'vitest';
import { StorageFullError } from '../../client/local/index.ts';
import type { StoragePlaneFactory } from './planes.ts';

const bytes = (s: string) => new TextEncoder().encode(s);
const text = (b: Uint8Array | null) => (b === null ? null : new TextDecoder().decode(b));
const MIB = 1 << 20;

export function storageBudget(make: StoragePlaneFactory) {
  describe('storage budget', () => {
    it('past its high-water mark a plane refuses submits whole (StorageFullError), writing nothing of them; claims, acks, cancels and reads go on, and a worker drains the backlog', async () => {
      // 8 MiB with the mark at 40 %: about 3.2 MiB, a few 400 KiB envelopes past an empty database.
      const h = await make(8 * MIB, 40);
      try {
        const d = h.plane;
        const before = await d.storage();
        expect(before).toMatchObject({ limitBytes: 8 * MIB, highWaterBytes: Math.floor((8 * MIB * 40) / 100), full: false });
        expect(before.bytes).toBeLessThan(before.highWaterBytes);
        const big = new Uint8Array(400 << 10).fill(7);
        let accepted = 0;
        let refused: unknown = null;
        for (let i = 0; i < 40 && !refused; i++) {
          try {
            await d.submit('q', big, { id: `big${i}` });
            accepted++;
          } catch (e) {
            refused = e;
          }
        }
        expect(refused, 'a submit past the high-water mark').toBeInstanceOf(StorageFullError);
        expect((refused as StorageFullError).code).toBe('storage_full');
        expect(accepted).toBeGreaterThan(2);
        const full = await d.storage();
        expect(full.full).toBe(true);
        expect(full.bytes!).toBeGreaterThanOrEqual(full.highWaterBytes);
        expect(await d.metrics()).toMatch(/^lakeshore_storage_bytes\{namespace="[^"]+",shard="[^"]+"\} \d+$/m);
        expect(await d.metrics()).toMatch(
          new RegExp(`^lakeshore_storage_limit_bytes\\{namespace="[^"]+",shard="[^"]+"\\} ${8 * MIB}$`, 'm'),
        );
        // Refused whole: a batch of small ones answers each item StorageFullError, none written; a
        // repeat of one already in is refused too.
        const batch = await d.submitMany(
          'q',
          ['s0', 's1', 's2'].map((id) => ({ envelope: bytes('x'), opts: { id } })),
        );
        expect(batch.map((r) => ('error' in r ? r.error.constructor.name : r.id))).toEqual([
          'StorageFullError',
          'StorageFullError',
          'StorageFullError',
        ]);
        await expect(d.submit('q', big, { id: 'big0' })).rejects.toBeInstanceOf(StorageFullError);
        expect(await d.count('q')).toBe(accepted);
        expect(await d.get('s0')).toBeNull();
        // Work already there moves on: a cancel, then a worker claims and acks the rest.
        expect(await d.cancel(`big${accepted - 1}`)).toBe(true);
        for (let i = 0; i < accepted - 1; i++) {
          const c = (await d.claim('q', 'w'))!;
          await d.journalAppend(c.id, 0, { kind: 0, seq: 0, body: bytes('progress'), meta: null }, { workerId: 'w', attempt: c.attempt });
          await d.ack(c.id, 'w', { attempt: c.attempt, result: bytes(`done ${c.id}`) });
        }
        expect(await d.count('q', 'succeeded')).toBe(accepted - 1);
        expect(await d.count('q')).toBe(0);
        expect(text(await d.result('big0'))).toBe('done big0');
        expect((await d.journalPage('big0')).frames).toHaveLength(1);
        await expect(d.submit('q', bytes('x'), { id: 'after' })).rejects.toBeInstanceOf(StorageFullError);
      } finally {
        await h.dispose();
      }
    }, 120_000);
  });
}
