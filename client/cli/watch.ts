/** The operator's views of what runs: `lakeshore workers` and `lakeshore events [QUEUE]`. */
import type { DispatchPlane, FeedItem } from '../types.ts';
import { EXIT, type Out } from './output.ts';

const ago = (ms: number) => {
  const s = Math.max(0, Math.round((Date.now() - ms) / 1000));
  return s < 120 ? `${s} s ago` : s < 7200 ? `${Math.round(s / 60)} min ago` : `${Math.round(s / 3600)} h ago`;
};

/** `lakeshore workers`: who was heard from lately, what each holds, and when it was last heard. */
export async function workers(d: DispatchPlane, out: Out) {
  const seen = await d.workers();
  if (out.json) {
    for (const w of seen) out.print(w);
    return EXIT.ok;
  }
  if (!seen.length) {
    out.print(
      seen,
      d.inProcess ? 'no worker heard from lately by this process (the local plane knows only its own)' : 'no worker heard from lately',
    );
    return EXIT.ok;
  }
  const rows = seen.map((w) => [
    w.worker_id,
    w.status,
    w.queues.join(','),
    w.host ? `${w.host}${w.pid ? `:${w.pid}` : ''}` : '-',
    w.concurrency === null ? '-' : String(w.concurrency),
    ago(w.last_seen),
    w.holding.length ? w.holding.map((h) => h.id).join(',') : '-',
  ]);
  const head = ['WORKER', 'STATUS', 'QUEUES', 'HOST', 'SLOTS', 'LAST HEARD', 'HOLDING'];
  const width = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (r: string[]) =>
    r
      .map((c, i) => (i === r.length - 1 ? c : c.padEnd(width[i]!)))
      .join('  ')
      .trimEnd();
  out.print(seen, [line(head), ...rows.map(line)].join('\n'));
  return EXIT.ok;
}

/** One line of a feed record: its time, then what happened. */
export function eventLine(e: FeedItem): string {
  if (e.kind === 'gap') return `-- records may be missing (${e.reason}${e.queue ? ` on ${e.queue}` : ''}): list the queue again`;
  const at = new Date(e.at).toISOString();
  if (e.kind === 'job') {
    const err = e.error ? `  ${e.error.type ? `${e.error.type}: ` : ''}${e.error.message}` : '';
    return `${at}  ${e.queue}  job ${e.id} ${e.status}${e.attempt ? ` (attempt ${e.attempt})` : ''}${e.worker_id ? ` by ${e.worker_id}` : ''}${err}`;
  }
  if ('level' in e) return `${at}  ${e.queue}  log ${e.level} ${e.worker_id} job ${e.id}: ${e.message}`;
  return `${at}  ${e.queue}  worker ${e.worker_id} ${e.status}`;
}

/** `lakeshore events [QUEUE]`: the lifecycle feed, live, one line per record, until SIGINT (or `--count N` records). */
export async function events(d: DispatchPlane, out: Out, queue: string | null, f: { count?: string }) {
  const max = f.count === undefined ? Infinity : Number(f.count);
  const stop = new AbortController();
  const onSignal = () => stop.abort();
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  let n = 0;
  try {
    if (n >= max) return EXIT.ok;
    for await (const e of d.events(queue, { signal: stop.signal })) {
      out.print(e, eventLine(e));
      if (++n >= max) break;
    }
  } catch (e) {
    if (!stop.signal.aborted) throw e;
  } finally {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
  }
  return EXIT.ok;
}

/** How long a waited-for job may sit queued in a queue where nothing is claimed before `result` says so (LAKESHORE_QUIET_QUEUE_MS). */
export const quietQueueMs = (env: NodeJS.ProcessEnv) => {
  const ms = Number(env.LAKESHORE_QUIET_QUEUE_MS ?? 60_000);
  return Number.isFinite(ms) && ms > 0 ? ms : 60_000;
};

/**
 * Watches the queue of a job `result` waits for: when the job has stayed queued for the quiet span
 * while its queue ran nothing and finished nothing, no worker is claiming from it. Said once.
 */
export function quietQueue(d: DispatchPlane, id: string, quietMs: number) {
  let since: { at: number; finished: number } | null = null;
  let said = false;
  let looked = 0;
  return async (): Promise<string | null> => {
    // A look costs two reads: at most one per 5 s (a quarter of the span when it is shorter).
    if (said || Date.now() - looked < Math.min(quietMs / 4, 5_000)) return null;
    looked = Date.now();
    const inv = await d.get(id);
    if (inv?.state !== 'queued') {
      since = null;
      return null;
    }
    const [o] = await d.overview([inv.queue]);
    if (!o) return null;
    const finished = o.counts.succeeded + o.counts.failed + o.counts.cancelled;
    const now = Date.now();
    if (o.counts.running > 0 || !since || since.finished !== finished) {
      since = { at: now, finished };
      return null;
    }
    if (now - since.at < quietMs) return null;
    said = true;
    const s = `${Math.round(quietMs / 1000)} s`;
    return o.paused
      ? `queue ${inv.queue} is paused: no worker gets ${id} until \`lakeshore resume ${inv.queue}\``
      : `no worker has claimed from queue ${inv.queue} in ${s} (${id} is still queued): is one serving it? \`lakeshore worker start --queue ${inv.queue} ...\`; \`lakeshore workers\` lists those heard from`;
  };
}
