/** The local plane's lifecycle feed (in-process: this process's transitions) and metrics. */
import type { Feed, FeedRecord } from '../../src/core/feed.ts';
import { metricsText } from '../../src/core/metrics.ts';
import type { Engine } from '../../src/core/engine.ts';
import type { FeedItem } from '../types.ts';

/** Records of `queue` as this process commits them, until `signal` aborts. */
export async function* feedOf(feed: Feed, ns: string, queue: string, signal?: AbortSignal): AsyncGenerator<FeedItem> {
  const waiting: FeedRecord[] = [];
  let wake: (() => void) | null = null;
  const off = feed.on((n, records) => {
    if (n !== ns) return;
    for (const r of records) if (r.queue === queue) waiting.push(r);
    wake?.();
  });
  const onAbort = () => wake?.();
  signal?.addEventListener('abort', onAbort, { once: true });
  try {
    while (!signal?.aborted) {
      while (waiting.length) yield waiting.shift()!;
      await new Promise<void>((r) => (wake = r));
      wake = null;
    }
  } finally {
    off();
    signal?.removeEventListener('abort', onAbort);
  }
}

/** The namespace's metrics: gauges from the rows, counters from this process's transitions. */
export async function localMetrics(engine: Engine, ns: string): Promise<string> {
  const overview = await engine.overview(ns);
  const feed = engine.park.events;
  return metricsText(ns, overview.map((o) => ({ overview: o, counters: { since: feed.since, counts: feed.counters(ns, o.queue)[0]?.counts ?? null } })));
}
