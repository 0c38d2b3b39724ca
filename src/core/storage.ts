/**
 * The storage budget of a plane's database (on the edge plane, of one shard): its bytes used, as
 * the database reports them after each batch (D1's `meta.size_after`; SQLite's page count times
 * page size), against a limit. Past the high-water mark (a share of the limit) new work is
 * refused (`storage_full`, 507): submits, and the ticks of schedules. The decision uses the size
 * the last batch reported, so a writer that has been idle while others filled the database lets
 * one more batch in before it knows: the room between the mark and the limit is for that. Everything that moves
 * existing work on (claims, acks, nacks, cancels, reads, retention) goes on, so a full database
 * drains instead of failing in the middle of a batch.
 */
import { LakeshoreError } from './errors.ts';
import type { StmtResult } from './port.ts';

export interface StorageOptions {
  /** The database's size cap: D1's is 10 GB. */
  limitBytes: number;
  /** Past this share of the limit, new work is refused (default 90). */
  highWaterPercent?: number;
  /** The database's name where there are several (a shard's binding); for metrics. */
  shard?: string;
}

export interface StorageState {
  shard: string;
  /** Bytes used as last reported; null until a batch has reported it. */
  bytes: number | null;
  limitBytes: number;
  highWaterBytes: number;
  /** Past the high-water mark: new work is refused. */
  full: boolean;
}

/** D1's size cap, which cannot be raised: 10 GB. */
export const DEFAULT_STORAGE_LIMIT_BYTES = 10_000_000_000;

/** How stale a size may be when it is reported (storage(), metrics): older, it is read again (one trivial query). */
export const STORAGE_FRESH_MS = 10_000;

export const storageFull = (s: StorageState) =>
  new LakeshoreError(
    'storage_full',
    `the ${s.shard === 'local' ? 'database' : `shard ${s.shard}`} is past its high-water mark (${s.bytes} of ${s.limitBytes} bytes; new work is refused past ${s.highWaterBytes}): submits wait until retention, a move or a new shard makes room; claims, acks and reads go on`,
  );

/** The storage of a database of `bytes` (null: not known) under these options: a shard as its operator looks at it. */
export function storageStateOf(o: StorageOptions, bytes: number | null): StorageState {
  const budget = new StorageBudget(o, () => 0);
  if (bytes !== null) budget.observe([{ rows: [], changes: 0, rowsRead: 0, rowsWritten: 0, sizeAfter: bytes }]);
  return budget.state();
}

export class StorageBudget {
  readonly limitBytes: number;
  readonly highWaterBytes: number;
  /** The database's name, for metrics: a shard's binding (set once the queue object has read its placement), or `local`. */
  shard: string;
  private bytes: number | null = null;
  private at = -Infinity;
  private readonly now: () => number;

  constructor(o: StorageOptions, now: () => number) {
    this.limitBytes = o.limitBytes;
    this.highWaterBytes = Math.floor((o.limitBytes * Math.min(100, Math.max(1, o.highWaterPercent ?? 90))) / 100);
    this.shard = o.shard ?? 'local';
    this.now = now;
  }

  /** A batch's results: the last size any of them reports is the database's size now. */
  observe(results: StmtResult[]): void {
    for (let i = results.length - 1; i >= 0; i--) {
      const size = results[i]!.sizeAfter;
      if (size !== undefined) {
        this.bytes = size;
        this.at = this.now();
        return;
      }
    }
  }

  /** Forgets the size read (the queue object's namespace moved to another shard): unknown until a batch says it. */
  forget(): void {
    this.bytes = null;
    this.at = -Infinity;
  }

  /** Whether the size was read within STORAGE_FRESH_MS. */
  get fresh(): boolean {
    return this.now() - this.at < STORAGE_FRESH_MS;
  }

  state(): StorageState {
    return {
      shard: this.shard,
      bytes: this.bytes,
      limitBytes: this.limitBytes,
      highWaterBytes: this.highWaterBytes,
      full: this.bytes !== null && this.bytes >= this.highWaterBytes,
    };
  }

  /** Throws storage_full when past the high-water mark. */
  admit(): void {
    const s = this.state();
    if (s.full) throw storageFull(s);
  }
}
