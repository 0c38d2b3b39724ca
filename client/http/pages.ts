/**
 * A namespace-wide view's pages, put back together: the plane answers at most 100 queues a request
 * (src/worker/queue-pages.ts), and the clients ask for every page and answer the whole, as a local
 * plane answers it.
 */
import type { WorkerSeen } from '../types.ts';

/** Each worker once across the pages (a worker of queues on two pages is on both): as the plane merges its queues. */
export function mergeWorkerPages(seen: WorkerSeen[]): WorkerSeen[] {
  const by = new Map<string, WorkerSeen>();
  for (const w of seen) {
    const cur = by.get(w.worker_id);
    if (!cur) {
      by.set(w.worker_id, { ...w, queues: [...w.queues], holding: [...w.holding] });
      continue;
    }
    // The latest word of it, and what it said of itself wherever it said it.
    const [newer, older] = w.last_seen > cur.last_seen ? [w, cur] : [cur, w];
    const said = (k: 'host' | 'pid' | 'version' | 'concurrency') => newer[k] ?? older[k];
    by.set(w.worker_id, {
      ...newer,
      host: said('host') as string | null,
      pid: said('pid') as number | null,
      version: said('version') as string | null,
      concurrency: said('concurrency') as number | null,
      queues: [...new Set([...cur.queues, ...w.queues])].sort(),
      holding: [...cur.holding, ...w.holding],
      first_seen: Math.min(cur.first_seen, w.first_seen),
      last_seen: newer.last_seen,
    });
  }
  return [...by.values()].sort((a, b) => b.last_seen - a.last_seen);
}

const MORE = 'lakeshore_more_queues';

/** The name to ask the next page of metrics `after`, from a page's `lakeshore_more_queues` gauge; null on the last page. */
export function morePagesAfter(text: string): string | null {
  const m = /^lakeshore_more_queues\{[^\n]*?after="((?:[^"\\]|\\.)*)"[^\n]*\} 1$/m.exec(text);
  return m ? m[1]!.replace(/\\(.)/g, (_, ch: string) => (ch === 'n' ? '\n' : ch)) : null;
}

/**
 * Pages of Prometheus text as one: each family once (its HELP and TYPE), its samples from every
 * page in order, a sample repeated on each page (the storage gauges) once, and the last page's
 * `lakeshore_more_queues` (0: nothing follows the whole).
 */
export function mergeMetricPages(pages: string[]): string {
  const families = new Map<string, { head: Set<string>; samples: Set<string> }>();
  pages.forEach((page, i) => {
    let cur: { head: Set<string>; samples: Set<string> } | undefined;
    let last = true;
    for (const line of page.split('\n')) {
      if (!line) continue;
      const head = /^# (HELP|TYPE) (\S+)/.exec(line);
      if (head) {
        const name = head[2]!;
        cur = families.get(name) ?? { head: new Set(), samples: new Set() };
        families.set(name, cur);
        cur.head.add(line);
        last = name !== MORE || i === pages.length - 1;
        continue;
      }
      if (cur && last && !line.startsWith('#')) cur.samples.add(line);
    }
  });
  return `${[...families.values()].flatMap((f) => [...f.head, ...f.samples]).join('\n')}\n`;
}
