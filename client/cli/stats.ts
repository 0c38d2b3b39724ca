/** `lakeshore stats`: each queue's jobs by state, the namespace's storage and its push targets. */
import { STATES, type State } from '../../src/core/states.ts';
import { nextRedrawAfter } from '../pace.ts';
import type { DispatchPlane, StorageState } from '../types.ts';
import { EXIT, type Out } from './output.ts';
import { pushLines } from './push-view.ts';

/** Bytes for people: 312 KB, 9.0 GB (powers of 1,000, as D1 states its 10 GB). */
export const sizeOf = (n: number) => {
  const units = ['B', 'KB', 'MB', 'GB', 'TB'];
  let i = 0;
  while (n >= 1000 && i < units.length - 1) {
    n /= 1000;
    i++;
  }
  return `${i === 0 ? n : n.toFixed(n >= 100 ? 0 : 1)} ${units[i]}`;
};

type Row = { queue: string; capped: string[] } & Record<State, number>;

export async function stats(d: DispatchPlane, out: Out, queues: string[], watch: boolean, intervalS: number) {
  /**
   * One overview: the counts of every state the dashboard shows (succeeded and cancelled up to
   * 10,000, then "at least", named in `capped`), in one request however many queues. Counting each
   * state of each queue exactly read every finished row kept until retention, at each redraw of
   * `--watch`.
   */
  const once = async () => {
    const all = await d.overview(queues.length ? queues : undefined);
    return {
      rows: all.map((q): Row => ({ queue: q.queue, ...q.counts, capped: q.capped })),
      push: pushLines(all),
    };
  };
  const render = (rows: Row[]) => {
    const head = ['queue', ...STATES];
    const cellOf = (r: Row, s: State) => `${r[s]}${r.capped.includes(s) ? '+' : ''}`;
    const lines = [head, ...rows.map((r) => [r.queue, ...STATES.map((s) => cellOf(r, s))])];
    const w = head.map((_, i) => Math.max(...lines.map((l) => l[i]!.length)));
    return lines.map((l) => l.map((c, i) => (i ? c.padStart(w[i]!) : c.padEnd(w[i]!))).join('  ')).join('\n');
  };
  /** The namespace's database against its budget, in a line: where it is, how full, and whether submits are refused. */
  const storageLine = (s: StorageState) => {
    const where = s.shard === 'local' ? 'the local file' : `shard ${s.shard}`;
    return `storage: ${where} holds ${sizeOf(s.bytes ?? 0)} of ${sizeOf(s.limitBytes)} (submits refused past ${sizeOf(s.highWaterBytes)})${s.full ? ': FULL, submits are refused' : ''}`;
  };
  if (!watch) {
    const { rows, push } = await once();
    if (out.json) {
      for (const r of rows) out.print(r);
      out.print({ storage: await d.storage() });
    } else out.print(`${rows.length ? render(rows) : 'no queues yet'}\n${storageLine(await d.storage())}${push}`);
    return EXIT.ok;
  }
  const stop = new AbortController();
  process.once('SIGINT', () => stop.abort());
  while (!stop.signal.aborted) {
    const at = Date.now();
    const { rows, push } = await once();
    const storage = await d.storage();
    // A redraw of a large namespace reads many pages: the next waits longer after a long one (client/pace.ts).
    const took = Date.now() - at;
    if (out.json) out.print({ at, took_ms: took, queues: rows, storage });
    else
      process.stdout.write(
        `${process.stdout.isTTY ? '\x1b[H\x1b[2J' : ''}${new Date(at).toISOString()}\n${render(rows)}\n${storageLine(storage)}${push}\n`,
      );
    await new Promise((r) => setTimeout(r, at + nextRedrawAfter(intervalS * 1000, took) - Date.now()));
  }
  return EXIT.ok;
}
