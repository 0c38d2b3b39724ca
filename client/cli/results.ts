/**
 * `lakeshore result ID ID ...`: many jobs waited on at once, each printed as it ends. Their queues
 * are looked up 1,000 a request (getMany), and the jobs of a queue are one `results` call for each
 * 1,000 (src/core/results.ts), not a wait each: a shell's `lakeshore result $(cat ids)` over a
 * sweep's thousand jobs is two requests, and more only as rounds go by.
 */
import { fromJsonBytes } from '../envelope.ts';
import { type Ended, InvocationCancelledError, InvocationFailedError, NotFoundError, TimeoutError } from '../errors.ts';
import type { DispatchPlane } from '../types.ts';
import { elapsed, EXIT, type Out } from './output.ts';
import { noInvocation } from '../../src/core/errors.ts';

/** The most jobs one look-up or call carries (the plane's batch limit). */
const MAX_IDS = 1_000;
/** The longest one round waits on the plane before it asks again. */
const ROUND_MS = 30_000;

/** How one job ended, as `result` prints it: a JSON line, a readable one, and the exit code it stands for. */
export function endOf(id: string, e: Ended | TimeoutError): { value: unknown; human: string; code: number } {
  if (e instanceof TimeoutError) return { value: { id, timed_out: true }, human: `timed out: ${e.message}`, code: EXIT.timeout };
  if (e.ok) {
    const shown = safeJson(e.result);
    return { value: { id, state: 'succeeded', result: shown }, human: JSON.stringify(shown), code: EXIT.ok };
  }
  const err = e.error;
  if (err instanceof InvocationFailedError)
    return {
      value: { id, state: 'failed', error: err.error },
      human: `failed: ${err.error.type ? `${err.error.type}: ` : ''}${err.error.message}`,
      code: EXIT.failed,
    };
  if (err instanceof InvocationCancelledError) return { value: { id, state: 'cancelled' }, human: 'cancelled', code: EXIT.cancelled };
  return { value: { id, error: { code: 'not_found', message: err.message } }, human: `not found: ${err.message}`, code: EXIT.notFound };
}

/** Bytes as JSON when they are JSON, else their size. */
export const safeJson = (b: Uint8Array | null): unknown => {
  if (b === null) return null;
  try {
    return fromJsonBytes(b);
  } catch {
    return { bytes: b.length };
  }
};

/** The exit code of many ends: 0 when every job succeeded, else failed, cancelled, not found, timed out, in that order. */
const worst = (codes: number[]): number =>
  [EXIT.failed, EXIT.cancelled, EXIT.notFound, EXIT.timeout].find((c) => codes.includes(c)) ?? EXIT.ok;

export async function results(d: DispatchPlane, out: Out, ids: string[], timeoutS: number): Promise<number> {
  const t0 = Date.now();
  const deadline = timeoutS > 0 ? t0 + timeoutS * 1000 : Infinity;
  const every = [...new Set(ids)];
  const codes: number[] = [];
  let left = every.length;
  const show = (id: string, e: Ended | TimeoutError) => {
    const end = endOf(id, e);
    codes.push(end.code);
    left--;
    out.print(end.value, `${id}  ${end.human}`);
  };
  // Each job's queue, 1,000 ids a look-up; a job the plane does not have is said at once.
  const queues = new Map<string, string[]>();
  for (let i = 0; i < every.length; i += MAX_IDS) {
    const part = every.slice(i, i + MAX_IDS);
    const rows = await d.getMany(part);
    part.forEach((id, k) => {
      const row = rows[k];
      const of = row ? queues.get(row.queue) : undefined;
      if (!row) show(id, { id, ok: false, error: new NotFoundError(noInvocation(id)) });
      else if (of) of.push(id);
      else queues.set(row.queue, [id]);
    });
  }
  const ticker = out.tty ? setInterval(() => out.status(`waiting for ${left} of ${every.length} jobs, ${elapsed(t0)}`), 1_000) : undefined;
  try {
    const calls: Promise<void>[] = [];
    for (const [queue, of] of queues)
      for (let i = 0; i < of.length; i += MAX_IDS) calls.push(waitOn(d, queue, of.slice(i, i + MAX_IDS), t0, deadline, show));
    await Promise.all(calls);
  } finally {
    clearInterval(ticker);
    out.clearStatus();
  }
  return worst(codes);
}

/** One call's rounds: waits on `ids` of `queue` until each ended or the deadline passed. */
async function waitOn(
  d: DispatchPlane,
  queue: string,
  ids: string[],
  t0: number,
  deadline: number,
  show: (id: string, e: Ended | TimeoutError) => void,
) {
  const rest = new Set(ids);
  while (rest.size > 0) {
    const wait = Math.min(ROUND_MS, deadline - Date.now());
    if (wait <= 0) break;
    for (const e of await d.results(queue, [...rest], { timeoutMs: wait })) {
      rest.delete(e.id);
      show(e.id, e);
    }
  }
  // Those still waiting when the wait was over, each with its state now (ids of one queue: one look-up).
  const waited = `${(deadline - t0) / 1000} s`; // the --timeout given
  const late = [...rest];
  if (late.length === 0) return;
  (await d.getMany(late)).forEach((row, k) => {
    const id = late[k] as string;
    show(id, new TimeoutError(`${id} is still ${row?.state ?? 'unknown'} after ${waited}`));
  });
}
