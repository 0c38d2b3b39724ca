/** The local plane's feed options, metrics and the workers heard from (the feed itself: feed-log.ts). */
import { logLines, type LogLine } from '../../src/core/feed.ts';
import * as v from '../../src/core/validate.ts';
import { metricsText } from '../../src/core/metrics.ts';
import type { Engine } from '../../src/core/engine.ts';
import type { FeedOptions, WorkerSeen } from '../types.ts';
import { BadRequestError } from '../errors.ts';
import { mergeWorkers, WorkerBook, type WorkerInfo } from '../../src/core/workers.ts';

/** The kinds a reader asked for; an unknown one is refused as over HTTP. */
export function kindsOf(kinds: FeedOptions['kinds']): Set<string> {
  const out = new Set<string>(kinds ?? ['job', 'worker']);
  for (const k of out)
    if (k !== 'job' && k !== 'worker')
      throw new BadRequestError(`unknown kind ${JSON.stringify(k)}: the feed has job and worker records (kinds=job,worker)`);
  if (!out.size) throw new BadRequestError('kinds names no kind: the feed has job and worker records');
  return out;
}

/** The namespace's metrics: gauges from the rows, counters from this process's transitions. */
export async function localMetrics(engine: Engine, ns: string): Promise<string> {
  const overview = await engine.overview(ns);
  const feed = engine.park.events;
  return metricsText(
    ns,
    overview.map((o) => ({ overview: o, counters: { since: feed.since, counts: feed.counters(ns, o.queue)[0]?.counts ?? null } })),
    await engine.storageState(),
  );
}

/** The workers this process heard from, per queue (core/workers.ts): the local plane's GET /workers. */
export class LocalWorkers {
  private readonly books = new Map<string, WorkerBook>();
  private readonly engine: Engine;
  private readonly ns: string;

  constructor(engine: Engine, ns: string) {
    this.engine = engine;
    this.ns = ns;
  }

  /** A claim of `workerId` on `queue`, with its card if it sent one. */
  heard(queue: string, workerId: string, info?: WorkerInfo | null): void {
    let b = this.books.get(queue);
    if (!b) this.books.set(queue, (b = new WorkerBook(this.engine.park.events, this.ns, queue)));
    b.heard(workerId, info);
  }

  /** An ack, nack or heartbeat of `workerId`: heard wherever it is known. */
  touch(workerId: string): void {
    for (const b of this.books.values()) if (b.knows(workerId)) b.heard(workerId);
  }

  stopped(queue: string, workerId: string): void {
    const limits = this.engine.limits;
    this.books.get(v.queue(queue, limits))?.stopped(v.workerId(workerId));
  }

  /** Log lines of a worker's jobs, for this process's feed readers. */
  async log(queue: string, workerId: string, lines: LogLine[]): Promise<void> {
    const limits = this.engine.limits;
    this.engine.park.events.toldLog(this.ns, v.queue(queue, limits), v.workerId(workerId), logLines(lines, limits));
  }

  async list(): Promise<WorkerSeen[]> {
    const seen = await Promise.all(
      [...this.books].map(async ([queue, b]) => ({
        queue,
        workers: b.list(),
        running: (await this.engine.list(this.ns, queue, 'running', 1000, null)).items.map((i) => ({ id: i.id, workerId: i.workerId })),
      })),
    );
    return mergeWorkers(seen);
  }
}
