/**
 * The HTTP client's reading of a lifecycle feed (GET /events, SSE): records as they commit,
 * resumed after a dropped connection from the last id it was given (Last-Event-ID), with a
 * `gap` item when the plane says records were missed (the reader should list again). It asks for
 * records in batches (`?batch=1`: one `records` event, a JSON array, for the records that went out
 * together): a third less CPU a record for a busy reader than an event each, and a fifth fewer bytes.
 */
import type { FeedItem } from '../types.ts';
import { LakeshoreError } from '../errors.ts';
import { oneByOne, sseBatches } from './sse.ts';
import { errorOf } from './transport.ts';
import type { Json } from './wire.ts';
import type { QueueSettingsWire } from '../../src/core/wire-types.ts';
import type { SettingsChange } from '../types.ts';

/** `connect(lastEventId, signal)`: one request for the feed after that id. */
export function followFeed(
  signal: AbortSignal | undefined,
  connect: (last: string | null, signal: AbortSignal) => Promise<Response>,
): AsyncIterableIterator<FeedItem> {
  return oneByOne(feedBatches(signal, connect));
}

/** The feed's items a chunk at a time: the records that came together, parsed together. */
async function* feedBatches(
  signal: AbortSignal | undefined,
  connect: (last: string | null, signal: AbortSignal) => Promise<Response>,
): AsyncGenerator<FeedItem[]> {
  let last: string | null = null;
  let failures = 0;
  while (!signal?.aborted) {
    const ac = new AbortController();
    const onAbort = () => ac.abort();
    signal?.addEventListener('abort', onAbort, { once: true });
    try {
      const res = await connect(last, ac.signal);
      if (!res.ok || !res.body) throw await errorOf(res);
      failures = 0;
      for await (const batch of sseBatches(res.body, ac.signal)) {
        const items: FeedItem[] = [];
        for (const ev of batch) {
          last = ev.id || last;
          if (ev.event === 'gap') items.push({ kind: 'gap', ...(JSON.parse(ev.data) as Json) } as FeedItem);
          else if (ev.event === 'job' || ev.event === 'worker') items.push(JSON.parse(ev.data) as FeedItem);
          else if (ev.event === 'records') for (const r of JSON.parse(ev.data) as FeedItem[]) items.push(r);
        }
        yield items;
      }
    } catch (e) {
      if (signal?.aborted) return;
      if (e instanceof LakeshoreError) throw e;
      if (++failures > 20) throw e;
      await new Promise((r) => setTimeout(r, Math.min(1000, 25 * 2 ** failures)));
    } finally {
      signal?.removeEventListener('abort', onAbort);
      ac.abort();
    }
  }
}

/** A settings change as the wire has it: a field left out (undefined) is not sent and keeps its value; a null clears it. */
export function settingsWire(s: SettingsChange): QueueSettingsWire {
  const b = s.retryBackoff;
  return {
    lease_ms: s.leaseMs,
    max_attempts: s.maxAttempts,
    max_running: s.maxRunning,
    claims_per_second: s.claimsPerSecond,
    retry_backoff: b && { initial_ms: b.initialMs, factor: b.factor, max_ms: b.maxMs, jitter: b.jitter },
    dead_letter_queue: s.deadLetterQueue,
    ttl_ms: s.ttlMs,
    retention_ms: s.retentionMs,
    journal_retention_ms: s.journalRetentionMs,
    time_limit_ms: s.timeLimitMs,
    push: s.push && {
      url: s.push.url,
      concurrency: s.push.concurrency,
      timeout_ms: s.push.timeoutMs,
      batch_size: s.push.batchSize,
      rotate_secret: s.push.rotateSecret,
    },
  };
}
