/** `lakeshore stats`: each queue's jobs by state, the namespace's storage and its push targets. */
import { STATES } from '../../src/core/states.ts';
import type { DispatchPlane } from '../types.ts';
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

export async function stats(d: DispatchPlane, out: Out, queues: string[], watch: boolean, intervalS: number) {
  const once = async () => {
    const names = queues.length ? queues : await d.listQueues();
    const rows = await Promise.all(
      names.map(async (q) => ({
        queue: q,
        ...Object.fromEntries(await Promise.all(STATES.map(async (s) => [s, await d.count(q, s)] as const))),
      })),
    );
    return rows as ({ queue: string } & Record<string, number>)[];
  };
  const render = (rows: ({ queue: string } & Record<string, number>)[]) => {
    const head = ['queue', ...STATES];
    const lines = [head, ...rows.map((r) => [r.queue, ...STATES.map((s) => String(r[s]))])];
    const w = head.map((_, i) => Math.max(...lines.map((l) => l[i]!.length)));
    return lines.map((l) => l.map((c, i) => (i ? c.padStart(w[i]!) : c.padEnd(w[i]!))).join('  ')).join('\n');
  };
  /** The namespace's database against its budget, in a line: where it is, how full, and whether submits are refused. */
  const storageLine = async () => {
    const s = await d.storage();
    const where = s.shard === 'local' ? 'the local file' : `shard ${s.shard}`;
    return `storage: ${where} holds ${sizeOf(s.bytes ?? 0)} of ${sizeOf(s.limitBytes)} (submits refused past ${sizeOf(s.highWaterBytes)})${s.full ? ': FULL, submits are refused' : ''}`;
  };
  if (!watch) {
    const rows = await once();
    if (out.json) {
      for (const r of rows) out.print(r);
      out.print({ storage: await d.storage() });
    } else
      out.print(
        `${rows.length ? render(rows) : 'no queues yet'}\n${await storageLine()}${await pushLines(
          d,
          rows.map((r) => r.queue),
        )}`,
      );
    return EXIT.ok;
  }
  const stop = new AbortController();
  process.once('SIGINT', () => stop.abort());
  while (!stop.signal.aborted) {
    const rows = await once();
    if (out.json) out.print({ at: Date.now(), queues: rows, storage: await d.storage() });
    else
      process.stdout.write(
        `${process.stdout.isTTY ? '\x1b[H\x1b[2J' : ''}${new Date().toISOString()}\n${render(rows)}\n${await storageLine()}${await pushLines(
          d,
          rows.map((r) => r.queue),
        )}\n`,
      );
    await new Promise((r) => setTimeout(r, intervalS * 1000));
  }
  return EXIT.ok;
}
