/**
 * The workers a queue object (or a local plane's process) has seen: who they say they are (sent along their claims, at start
 * and now and then after), when each was last heard from (any claim, ack, nack or heartbeat of
 * theirs), and whether they stopped. Kept in the object's memory, like its counters: a worker is
 * known again from its next call after a restart. A worker not heard from for LOST_MS is lost.
 */
import type { Feed } from './feed.ts';

export interface WorkerInfo {
  queues?: string[] | null;
  host?: string | null;
  pid?: number | null;
  version?: string | null;
  concurrency?: number | null;
}

export interface SeenWorker {
  workerId: string;
  info: WorkerInfo;
  firstSeen: number;
  lastSeen: number;
  status: 'active' | 'stopped' | 'lost';
}

/** Silent this long (two default leases), a worker is lost. */
export const LOST_MS = 60_000;
/** Forgotten this long after it stopped or was lost. */
const FORGET_MS = 10 * 60_000;
/** Workers kept per queue object at most (the least recently seen go first). */
const MOST = 1000;

export class WorkerBook {
  private readonly seen = new Map<string, SeenWorker>();
  private readonly feed: Feed;
  private readonly ns: string;
  private readonly queue: string;

  constructor(feed: Feed, ns: string, queue: string) {
    this.feed = feed;
    this.ns = ns;
    this.queue = queue;
  }

  /** A call of `workerId`, with what it says of itself if it did. */
  heard(workerId: unknown, info?: WorkerInfo | null, now = Date.now()): void {
    if (typeof workerId !== 'string' || !workerId) return;
    const w = this.seen.get(workerId);
    if (w) {
      w.lastSeen = now;
      if (info) w.info = clean(info);
      if (w.status !== 'active') {
        w.status = 'active';
        this.tell(workerId, 'started');
      }
      return;
    }
    if (this.seen.size >= MOST) this.seen.delete(this.seen.keys().next().value!);
    this.seen.set(workerId, { workerId, info: clean(info ?? {}), firstSeen: now, lastSeen: now, status: 'active' });
    this.tell(workerId, 'started');
  }

  knows(workerId: string): boolean {
    return this.seen.has(workerId);
  }

  /** The worker said it stops. */
  stopped(workerId: string, now = Date.now()): boolean {
    const w = this.seen.get(workerId);
    if (!w || w.status === 'stopped') return false;
    w.status = 'stopped';
    w.lastSeen = now;
    this.tell(workerId, 'stopped');
    return true;
  }

  /** Marks the silent ones lost (telling the feed), forgets the long gone; answers the rest. */
  list(now = Date.now()): SeenWorker[] {
    for (const [id, w] of this.seen) {
      if (w.status === 'active' && now - w.lastSeen > LOST_MS) {
        w.status = 'lost';
        this.tell(id, 'lost');
      } else if (w.status !== 'active' && now - w.lastSeen > FORGET_MS) this.seen.delete(id);
    }
    return [...this.seen.values()].map((w) => ({ ...w, info: { ...w.info } }));
  }

  private tell(workerId: string, status: 'started' | 'stopped' | 'lost'): void {
    this.feed.toldWorker(this.ns, { kind: 'worker', worker_id: workerId, queue: this.queue, status, at: Date.now() });
  }
}

/** Each worker once, across the queues that heard from it: what it said, when last heard, what it holds. */
export function mergeWorkers(seen: { queue: string; workers: SeenWorker[]; running: { id: string; workerId: string | null }[] }[]) {
  const by = new Map<string, { w: SeenWorker; queues: Set<string>; holding: { id: string; queue: string }[] }>();
  for (const s of seen) {
    for (const w of s.workers) {
      const cur = by.get(w.workerId);
      if (!cur) by.set(w.workerId, { w, queues: new Set([s.queue]), holding: [] });
      else {
        cur.queues.add(s.queue);
        // The latest word of it, and what it said of itself wherever it said it.
        const [newer, older] = w.lastSeen > cur.w.lastSeen ? [w, cur.w] : [cur.w, w];
        const info = { ...older.info };
        for (const [k, v] of Object.entries(newer.info)) if (v !== null && v !== undefined) (info as Record<string, unknown>)[k] = v;
        cur.w = { ...newer, info, firstSeen: Math.min(w.firstSeen, cur.w.firstSeen) };
      }
    }
    for (const r of s.running) if (r.workerId) by.get(r.workerId)?.holding.push({ id: r.id, queue: s.queue });
  }
  return [...by.values()]
    .sort((a, b) => b.w.lastSeen - a.w.lastSeen)
    .map(({ w, queues, holding }) => ({
      worker_id: w.workerId,
      status: w.status,
      queues: [...queues].sort(),
      host: w.info.host ?? null,
      pid: w.info.pid ?? null,
      version: w.info.version ?? null,
      concurrency: w.info.concurrency ?? null,
      first_seen: w.firstSeen,
      last_seen: w.lastSeen,
      holding,
    }));
}

/** What a worker says of itself, within bounds (it is the caller's word, shown to operators). */
function clean(i: WorkerInfo): WorkerInfo {
  const text = (v: unknown, n: number) => (typeof v === 'string' ? v.slice(0, n) : null);
  const int = (v: unknown) => (typeof v === 'number' && Number.isInteger(v) && v >= 0 && v < 2 ** 31 ? v : null);
  return {
    queues: Array.isArray(i.queues)
      ? i.queues
          .filter((q): q is string => typeof q === 'string')
          .slice(0, 32)
          .map((q) => q.slice(0, 128))
      : null,
    host: text(i.host, 200),
    pid: int(i.pid),
    version: text(i.version, 64),
    concurrency: int(i.concurrency),
  };
}
