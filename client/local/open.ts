/**
 * Opens a SQLite file as a local plane: its schema migrated, the engine on its port, this
 * process's clocks, the workers it hears from and the feed the file carries between processes.
 */
import { Engine } from '../../src/core/engine.ts';
import type { Limits } from '../../src/core/limits.ts';
import * as v from '../../src/core/validate.ts';
import { LocalClocks } from './clocks.ts';
import { FeedLog } from './feed-log.ts';
import { migrate } from './migrate.ts';
import { LocalWorkers } from './observe.ts';
import { DatabaseSync } from './sqlite.ts';
import { SqlitePort } from './sqlite-port.ts';

export interface DispatchOptions {
  namespace?: string;
  limits?: Partial<Limits>;
  /** How often to check for other processes' commits while something waits. Default 5 ms. */
  changeCheckMs?: number;
  /** How long a transaction waits for another process's write lock. Default 10 s. */
  busyTimeoutMs?: number;
  /** The plane's clock (leases, timestamps); tests inject one. Default Date.now. */
  now?: () => number;
  /**
   * The file's storage budget (docs/contract.md, "Storage"): past the high-water mark submits are
   * refused with StorageFullError. Default 10 GB and 90 %, as a D1 shard's.
   */
  storage?: { limitBytes: number; highWaterPercent?: number };
}

/** What a local plane is made of (Dispatch and its operator verbs share them). */
export interface LocalPlane {
  namespace: string;
  db: DatabaseSync;
  engine: Engine;
  now: () => number;
  /** This process's alarms and its watch on other processes' commits (clocks.ts). */
  clocks: LocalClocks;
  /** The workers this process heard from (GET /workers on the edge plane). */
  workersSeen: LocalWorkers;
  feedLog: FeedLog;
}

export function openLocal(path: string, opts: DispatchOptions): LocalPlane {
  const namespace = v.namespace(opts.namespace ?? 'default');
  const db = new DatabaseSync(path);
  // Schema setup waits for the lock inside SQLite; transitions wait in SqlitePort, without blocking.
  db.exec(`PRAGMA busy_timeout = ${opts.busyTimeoutMs ?? 10_000}`);
  if (path !== ':memory:') {
    db.exec('PRAGMA journal_mode = WAL');
    db.exec('PRAGMA synchronous = NORMAL');
  }
  migrate(db);
  db.exec('PRAGMA busy_timeout = 0');
  const now = opts.now ?? Date.now;
  const port = new SqlitePort(db, opts.busyTimeoutMs ?? 10_000);
  const engine: Engine = new Engine(port, {
    limits: opts.limits,
    now,
    storage: opts.storage,
    onWake: (ns, queue, at) => clocks.arm(ns, queue, at),
    // Dead letters are queued rows of another queue: wake this process's claims, they look again.
    onFailed: () => engine.park.wakeAll(),
  });
  const clocks = new LocalClocks(db, path, engine, now, opts.changeCheckMs ?? 5);
  // A job finished: unless a purge pass already knows when it has work next, run one soon.
  engine.park.onFinish = (ns, queue) => clocks.clock(ns, queue).soon();
  return {
    namespace,
    db,
    engine,
    now,
    clocks,
    workersSeen: new LocalWorkers(engine, namespace),
    // The feed crosses processes: this process's records go to the file, readers follow the file.
    feedLog: new FeedLog(port, engine.park.events, namespace),
  };
}
