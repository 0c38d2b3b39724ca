/**
 * `lakeshore stats`'s push lines: a line per push queue with its target and its pusher's figures
 * (docs/contract.md, "Views"): in flight, delivered and not, the target's answer time, the last
 * error. On a local plane the figures live in the `lakeshore push` process, and the line says so.
 */
import type { QueueOverview } from '../types.ts';

export function pushLines(overview: QueueOverview[]): string {
  const pushed = overview.filter((q) => q.settings.push);
  return pushed
    .map((q) => {
      const t = q.settings.push!;
      const p = q.pushing;
      const batches = t.batchSize > 1 ? ` (batches of up to ${t.batchSize})` : '';
      if (!p)
        return `\npush: ${q.queue} -> ${t.url}, ${t.concurrency} at once${batches} (its figures are where it is pushed from: \`lakeshore push\`)`;
      const { acked, accepted, nacked, refused } = p.delivered;
      const e = p.lastError;
      return `\npush: ${q.queue} -> ${t.url}: ${p.inFlight}/${t.concurrency} in flight${batches}, ${acked + accepted} delivered, ${nacked + refused} not${p.latencyMs ? `, answers in p50 ${p.latencyMs.p50} ms, p99 ${p.latencyMs.p99} ms` : ''}${e ? `; last error ${Math.round((Date.now() - e.at) / 1000)} s ago: ${e.status ?? 'no answer'}${e.id ? ` (${e.id})` : ''}: ${e.message}` : ''}`;
    })
    .join('');
}
