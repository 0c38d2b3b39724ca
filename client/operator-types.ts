/** What an operator of a deployment reads through a client: its shards, and a namespace's move between them. */
import type { StorageState } from '../src/core/storage.ts';
export type { StorageState };

/** A shard of the deployment as its operator sees it (HttpDispatch.shards): its storage, and how many namespaces live on it. */
export interface ShardInfo extends StorageState {
  namespaces: number;
}

/** A namespace on a shard (HttpDispatch.shardNamespaces): `moving` while a move of it has its writes fenced. */
export interface ShardNamespace {
  namespace: string;
  state: 'active' | 'moving';
  placedAt: number;
}

/** A namespace's move, under way or ended (HttpDispatch.moveNamespace, moveStatus). */
export interface MoveReport {
  namespace: string;
  from: string;
  to: string;
  /** `moving` until it ends: `moved`, or `undone` (it stays on `from`; `error` says why). */
  state: 'moving' | 'moved' | 'undone';
  /**
   * Where it is: clear, track, reserve, jobs, frames, due, workers, check, live (copying, comparing and
   * catching up while it works), mark, fence, changed, rest, verify, switch, unfence (its writes
   * fenced), untrack, undo-clear, undo-mark, ended (docs/contract.md, "move status").
   */
  phase: string;
  /** Copied so far. */
  jobs: number;
  frames: number;
  queues: number;
  schedules: number;
  /** Queue objects fenced. */
  objects: number;
  /** Jobs copied again or deleted with its writes fenced: those written during its last round of catching up. */
  caughtUp: number;
  /** How long the namespace's writes waited (so far, while moving), and the whole move, in ms. */
  fencedMs: number;
  ms: number;
  /** The plane's steps it took, the most D1 statements and object calls one made, and D1's rows read in all. */
  steps: number;
  mostSubrequestsAStep: number;
  rowsRead: number;
  error: string | null;
}
