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
