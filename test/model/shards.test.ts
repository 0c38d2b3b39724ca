/** Where a new namespace goes (src/core/shards.ts): the shard with the most room, spread when they are alike. */
import { describe, expect, it } from 'vitest';
import { pickShard, SHARD_BINDING } from '../../src/core/shards.ts';

const GB = 1_000_000_000;

describe('placing a new namespace', () => {
  it('takes the shard with the most room left', () => {
    const shards = [
      { name: 'DB', bytes: 6 * GB, namespaces: 1 },
      { name: 'DB_1', bytes: 2 * GB, namespaces: 40 },
      { name: 'DB_2', bytes: 4 * GB, namespaces: 2 },
    ];
    expect(pickShard(shards, 10 * GB)).toBe('DB_1');
  });

  it('spreads namespaces round shards whose room is within a percent of the limit, fewest namespaces first', () => {
    const shards = [
      { name: 'DB', bytes: 50_000_000, namespaces: 3 },
      { name: 'DB_1', bytes: 10_000_000, namespaces: 3 },
      { name: 'DB_2', bytes: 90_000_000, namespaces: 2 },
    ];
    expect(pickShard(shards, 10 * GB)).toBe('DB_2');
    // An empty plane: each new namespace goes where there are fewest, the first shard on a tie.
    const empty = ['DB', 'DB_1', 'DB_2'].map((name) => ({ name, bytes: 12_288, namespaces: 0 }));
    const placed: string[] = [];
    for (let i = 0; i < 6; i++) {
      const s = pickShard(empty, 10 * GB);
      placed.push(s);
      empty.find((x) => x.name === s)!.namespaces++;
    }
    expect(placed).toEqual(['DB', 'DB_1', 'DB_2', 'DB', 'DB_1', 'DB_2']);
  });

  it('names shards by their D1 binding: DB, DB_1, DB_2, ...', () => {
    expect(['DB', 'DB_1', 'DB_12'].every((b) => SHARD_BINDING.test(b))).toBe(true);
    expect(['DB_0', 'DB_', 'DBX', 'CODE', 'DB_01'].some((b) => SHARD_BINDING.test(b))).toBe(false);
    expect(() => pickShard([], GB)).toThrow(/no shard/);
  });
});
