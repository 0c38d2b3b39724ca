/**
 * A namespace's move as the mover (mover.ts) keeps it in its storage between steps, and as it is
 * answered: its phases in order, where it is, and what it counted.
 */
import type { Block, Cursor, FramesOwed } from './copy.ts';

export type Phase =
  | 'clear'
  | 'track'
  | 'reserve'
  | 'jobs'
  | 'frames'
  | 'due'
  | 'workers'
  | 'check'
  | 'live'
  | 'mark'
  | 'fence'
  | 'changed'
  | 'rest'
  | 'verify'
  | 'switch'
  | 'unfence'
  | 'untrack'
  | 'undo-clear'
  | 'undo-mark'
  | 'ended';
/** The phases after which nothing is undone. */
export const SWITCHED: ReadonlySet<Phase> = new Set(['unfence', 'untrack', 'undo-clear', 'undo-mark', 'ended']);

/** A move, as the mover keeps it between steps and answers it. */
export interface MoveStatus {
  ns: string;
  from: string;
  to: string;
  /** `moving` until it ends: `moved`, or `undone` (with the error that undid it). */
  state: 'moving' | 'moved' | 'undone';
  phase: Phase;
  jobs: number;
  frames: number;
  queues: number;
  schedules: number;
  /** Queue objects fenced. */
  objects: number;
  /** Jobs copied again, made or deleted under the fence: what changed while the copy ran. */
  caughtUp: number;
  /** How long writes were fenced, in ms (so far, while moving), and the whole move. */
  fencedMs: number;
  ms: number;
  /** The mover's invocations it took, the most subrequests one asked, and D1's rows read in all. */
  steps: number;
  mostInStep: number;
  rowsRead: number;
  error: string | null;
}

export interface Move extends MoveStatus {
  /** The directory's epoch: the mark's while fenced, then the switch's (or the undo's). */
  epoch: number;
  startedAt: number;
  /** When the directory was marked and writes fenced (null: not yet). */
  markedAt: number | null;
  /** A job whose frames are copied before the phase goes on (copy.ts). */
  owed: FramesOwed | null;
  /** Passing failures of the platform in a row (platform-errors.ts). */
  passing: number;
  cursor: Cursor;
  /** In `rest`, which of REST_TABLES. */
  table: number;
  /** The highest worker number copied and compared while it works (phase `workers`); the fence copies those after it. */
  workersTo: number;
  /** In `live`, which round of catching up, how many jobs it caught up so far, and the last id it takes. */
  round: { n: number; caughtUp: number; until?: string | null; before?: number };
  block: Block | null;
  /** Where the objects are unfenced onto: the target, or where it was (undone). */
  unfenceTo: string;
}

/** The copy a move left on the shard it moved from, and when it is deleted. */
export interface Cleanup {
  shard: string;
  at: number;
}

/** A move of `ns` from shard `from` to `to`, at its first phase. */
export const newMove = (ns: string, from: string, to: string): Move => ({
  ns,
  from,
  to,
  state: 'moving',
  phase: 'clear',
  jobs: 0,
  frames: 0,
  queues: 0,
  schedules: 0,
  objects: 0,
  caughtUp: 0,
  fencedMs: 0,
  ms: 0,
  steps: 0,
  mostInStep: 0,
  rowsRead: 0,
  error: null,
  epoch: 0,
  startedAt: Date.now(),
  markedAt: null,
  owed: null,
  passing: 0,
  cursor: null,
  table: 0,
  workersTo: 0,
  round: { n: 1, caughtUp: 0 },
  block: null,
  unfenceTo: to,
});

/** A move as it is answered: without what only the mover needs between steps. */
export const statusOf = ({
  epoch,
  startedAt,
  markedAt,
  owed,
  passing,
  cursor,
  table,
  workersTo,
  round,
  block,
  unfenceTo,
  ...status
}: Move): MoveStatus => status;
