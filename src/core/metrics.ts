/**
 * Metrics in the Prometheus text format (0.0.4): per queue, gauges from the rows (jobs waiting or
 * running, the longest wait, paused) and counters of transitions. The counters live in memory
 * where the transitions run (the queue object on the edge plane, the process on the local one):
 * they start again at 0 when that restarts, which Prometheus' rate() and increase() take as a
 * counter reset; `lakeshore_counters_started_seconds` says when they started.
 */
import { COUNTERS, type Counter } from './feed.ts';
import type { QueueOverview } from './sql/list.ts';
import type { StorageState } from './storage.ts';

export interface QueueMetrics {
  overview: QueueOverview;
  /** The queue's counters and when they started (epoch ms); null: none kept (no transition seen). */
  counters: { since: number; counts: Record<Counter, number> | null } | null;
}

const esc = (v: string) => v.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n');

/**
 * `next`: where a page of the namespace's queues stopped (the plane answers at most 100 queues a
 * request, worker/queue-pages.ts): `lakeshore_more_queues` says 1, with the name to pass as
 * `after`; 0 on the last page or a whole answer.
 */
export function metricsText(ns: string, queues: QueueMetrics[], storage?: StorageState, next: string | null = null): string {
  const lines: string[] = [];
  const family = (name: string, type: 'gauge' | 'counter', help: string, rows: [Record<string, string>, number][]) => {
    lines.push(`# HELP ${name} ${help}`, `# TYPE ${name} ${type}`);
    for (const [labels, value] of rows) {
      const l = Object.entries({ namespace: ns, ...labels })
        .map(([k, v]) => `${k}="${esc(v)}"`)
        .join(',');
      lines.push(`${name}{${l}} ${Number.isFinite(value) ? value : 0}`);
    }
  };
  family(
    'lakeshore_jobs',
    'gauge',
    'Jobs waiting (delayed, queued), running, or failed and kept, counted from the rows.',
    queues.flatMap((q) =>
      (['delayed', 'queued', 'running', 'failed'] as const).map((s): [Record<string, string>, number] => [
        { queue: q.overview.queue, state: s },
        q.overview.counts[s],
      ]),
    ),
  );
  family(
    'lakeshore_oldest_queued_seconds',
    'gauge',
    'How long the longest-waiting queued job has waited (0: none waits).',
    queues.map((q) => [{ queue: q.overview.queue }, (q.overview.oldestQueuedMs ?? 0) / 1000]),
  );
  family(
    'lakeshore_paused',
    'gauge',
    '1 while the queue is paused.',
    queues.map((q) => [{ queue: q.overview.queue }, q.overview.paused ? 1 : 0]),
  );
  family(
    'lakeshore_transitions_total',
    'counter',
    'Transitions since the counters started (they reset when the queue object or process restarts).',
    queues.flatMap((q) =>
      q.counters?.counts
        ? COUNTERS.map((c): [Record<string, string>, number] => [{ queue: q.overview.queue, transition: c }, q.counters!.counts![c]])
        : [],
    ),
  );
  family(
    'lakeshore_counters_started_seconds',
    'gauge',
    'When the transition counters of the queue started, in Unix seconds.',
    queues.flatMap((q) =>
      q.counters ? [[{ queue: q.overview.queue }, Math.floor(q.counters.since / 1000)] as [Record<string, string>, number]] : [],
    ),
  );
  const pushing = queues.flatMap((q) => (q.overview.pushing ? [[q.overview.queue, q.overview.pushing] as const] : []));
  family(
    'lakeshore_push_in_flight',
    'gauge',
    "Deliveries a push queue's pusher has on their way to its target.",
    pushing.map(([queue, p]) => [{ queue }, p.inFlight]),
  );
  family(
    'lakeshore_push_deliveries_total',
    'counter',
    "A push queue's deliveries by outcome (acked, accepted, nacked, refused) since its pusher started.",
    pushing.flatMap(([queue, p]) =>
      (['acked', 'accepted', 'nacked', 'refused'] as const).map((o): [Record<string, string>, number] => [
        { queue, outcome: o },
        p.delivered[o],
      ]),
    ),
  );
  family(
    'lakeshore_push_latency_seconds',
    'gauge',
    "How long a push queue's target took to answer, over its last 256 answers (quantile 0.5 and 0.99).",
    pushing.flatMap(([queue, p]) =>
      p.latencyMs
        ? [
            [{ queue, quantile: '0.5' }, p.latencyMs.p50 / 1000] as [Record<string, string>, number],
            [{ queue, quantile: '0.99' }, p.latencyMs.p99 / 1000] as [Record<string, string>, number],
          ]
        : [],
    ),
  );
  if (storage) {
    family('lakeshore_storage_bytes', 'gauge', "Bytes the namespace's database (its shard) holds, as it last reported them.", [
      [{ shard: storage.shard }, storage.bytes ?? 0],
    ]);
    family(
      'lakeshore_storage_limit_bytes',
      'gauge',
      "The database's storage limit: past STORAGE_HIGH_WATER_PERCENT of it, submits are refused (storage_full).",
      [[{ shard: storage.shard }, storage.limitBytes]],
    );
    family('lakeshore_storage_high_water_bytes', 'gauge', 'Past this many bytes, submits are refused (storage_full).', [
      [{ shard: storage.shard }, storage.highWaterBytes],
    ]);
  }
  family(
    'lakeshore_more_queues',
    'gauge',
    '1 when more queues follow this page: ask again with ?after= its after label; 0 on the last page.',
    [[next === null ? {} : { after: next }, next === null ? 0 : 1]],
  );
  return `${lines.join('\n')}\n`;
}
