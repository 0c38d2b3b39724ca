/**
 * Shards: the D1 databases the edge plane stores its rows in (src/durable/directory.ts), and the
 * rule that places a new namespace on one. Pure logic, so the fast tier tests it.
 */

/** A shard's binding name: DB (the home database), DB_1, DB_2, ... */
export const SHARD_BINDING = /^DB(_[1-9][0-9]*)?$/;

/** Where a namespace lives, and whether a move is copying it (its writes fenced meanwhile). */
export interface Placement {
  shard: string;
  state: 'active' | 'moving';
  /** Bumped by each move. */
  epoch: number;
}

export interface ShardRoom {
  name: string;
  /** Bytes the shard holds now. */
  bytes: number;
  /** Namespaces placed on it. */
  namespaces: number;
}

/** The shards a new namespace may go on: those whose room left under `limitBytes` is within a percent of the most. */
export function nearShards(shards: Pick<ShardRoom, 'name' | 'bytes'>[], limitBytes: number): string[] {
  if (!shards.length) throw new Error('the plane has no shard: bind a D1 database as DB');
  const room = (s: Pick<ShardRoom, 'bytes'>) => limitBytes - s.bytes;
  const most = Math.max(...shards.map(room));
  return shards.filter((s) => most - room(s) < limitBytes / 100).map((s) => s.name);
}

/**
 * The shard a new namespace goes on: among the near shards (nearShards), the one with the fewest
 * namespaces, so an empty plane spreads its first namespaces round the shards; then the first.
 * (The directory applies this rule inside the INSERT that places a namespace, so placements made
 * at the same moment each count the ones before: src/durable/directory.ts.)
 */
export function pickShard(shards: ShardRoom[], limitBytes: number): string {
  const near = new Set(nearShards(shards, limitBytes));
  return shards.filter((s) => near.has(s.name)).reduce((best, s) => (s.namespaces < best.namespaces ? s : best)).name;
}
