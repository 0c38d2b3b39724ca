/**
 * What a push delivery says and what its answer says (docs/contract.md, "Push delivery"): the
 * body POSTed, a receiver's 2xx body as one job's result, a batch's body as each job's outcome, a
 * `Retry-After` as a delay, and the line the feed tells of each delivery.
 */
import { toBase64, utf8 } from './bytes.ts';
import type { LogLine } from './feed.ts';
import type { Claimed } from './types.ts';

/**
 * The delivery's body: one job's `lakeshore.delivery`, or a `lakeshore.batch` of them, each job
 * with its delivery token (`tokens`, in the jobs' order).
 */
export function deliveryBody(
  cs: Claimed[],
  tokens: (string | null)[],
  batched: boolean,
  o: { ns: string; queue: string; workerId: string },
): string {
  const job = (c: Claimed, k: number) => ({
    id: c.id,
    attempt: c.attempt,
    lease_until: c.leaseUntil,
    priority: c.priority,
    envelope: toBase64(c.envelope),
    delivery_token: tokens[k] ?? null,
  });
  if (!batched) {
    const { id, attempt, lease_until, priority, envelope, delivery_token } = job(cs[0]!, 0);
    return JSON.stringify({
      type: 'lakeshore.delivery',
      id,
      namespace: o.ns,
      queue: o.queue,
      attempt,
      lease_until,
      priority,
      envelope,
      worker_id: o.workerId,
      delivery_token,
    });
  }
  return JSON.stringify({ type: 'lakeshore.batch', namespace: o.ns, queue: o.queue, worker_id: o.workerId, jobs: cs.map(job) });
}

export /** What a batch's answer says of one job (its `outcomes`); a job it does not name is acked without a result. */
type JobOutcome =
  | { status: 'ok'; result: Uint8Array | null }
  | { status: 'retry'; error: string; delayMs: number | null }
  | { status: 'accepted' }
  /** An entry that cannot be taken: nacked, and retried unless no answer could do better (a result over the limit). */
  | { status: 'unreadable'; error: string; retry: boolean };

/** A `Retry-After` (seconds, or an HTTP date) as a delay in ms; null when absent or unreadable. */
export function retryAfterMs(v: string | null, now: number, max: number): number | null {
  if (!v) return null;
  const s = v.trim();
  const ms = /^\d+$/.test(s) ? Number(s) * 1000 : Date.parse(s) - now;
  return Number.isFinite(ms) ? Math.min(max, Math.max(0, Math.round(ms))) : null;
}

export /** The result a 2xx body stands for: JSON kept as it came, other text as a JSON string, nothing as none. */
function resultOf(body: Uint8Array, contentType: string | null): Uint8Array | null {
  if (!body.length) return null;
  const text = new TextDecoder().decode(body);
  if (/\bjson\b/i.test(contentType ?? '')) {
    try {
      JSON.parse(text);
      return body;
    } catch {
      /* not JSON after all: kept as text */
    }
  }
  return utf8(JSON.stringify(text));
}

/**
 * What a batch's 2xx body says of its jobs: `{"outcomes": {"<job id>": {"status": "ok", "result":
 * any} | {"status": "retry", "error"?: string, "delay_ms"?: number} | {"status": "accepted"}}}`.
 * A body that is not such JSON (empty, text; whatever its content type) names none: every job is
 * acked without a result.
 * An entry that is not one of those is retried, saying why.
 */
export function outcomesOf(body: Uint8Array, resultBytes: number, maxDelayMs: number): Map<string, JobOutcome> {
  const out = new Map<string, JobOutcome>();
  if (!body.length) return out;
  let j: unknown;
  try {
    j = JSON.parse(new TextDecoder().decode(body));
  } catch {
    return out;
  }
  const named = (j as { outcomes?: unknown } | null)?.outcomes;
  if (typeof named !== 'object' || named === null || Array.isArray(named)) return out;
  for (const [id, v] of Object.entries(named as Record<string, unknown>)) {
    const o = (typeof v === 'object' && v !== null && !Array.isArray(v) ? v : {}) as Record<string, unknown>;
    if (o.status === 'ok') {
      const result = o.result === undefined || o.result === null ? null : utf8(JSON.stringify(o.result));
      out.set(
        id,
        result && result.length > resultBytes
          ? { status: 'unreadable', error: `its result is ${result.length} bytes; the result limit is ${resultBytes}`, retry: false }
          : { status: 'ok', result },
      );
    } else if (o.status === 'retry') {
      const delay = o.delay_ms;
      const delayMs = typeof delay === 'number' && Number.isFinite(delay) && delay >= 0 ? Math.min(maxDelayMs, Math.round(delay)) : null;
      out.set(id, { status: 'retry', error: typeof o.error === 'string' ? o.error.slice(0, 500) : '', delayMs });
    } else if (o.status === 'accepted') out.set(id, { status: 'accepted' });
    else
      out.set(id, {
        status: 'unreadable',
        error: `its outcome ${JSON.stringify(v).slice(0, 200)} is not {"status": "ok" | "retry" | "accepted"}`,
        retry: true,
      });
  }
  return out;
}

/** One delivery's outcome. */
export interface Delivered {
  id: string;
  attempt: number;
  /** The receiver's HTTP status; null when none came (timeout, connection). */
  status: number | null;
  /** How long the receiver took to answer (or to fail to). */
  ms: number;
  /** The jobs in the delivery that carried this one (1 unless the queue pushes batches). */
  batch: number;
  /** acked (2xx), accepted (202: the receiver finishes it), nacked (retried or failed per the budget), refused (its answer came after the lease). */
  outcome: 'acked' | 'accepted' | 'nacked' | 'refused';
  error?: string;
  /** What the nack made of the job: queued again, delayed (`inMs` until it is delivered again), or failed. */
  next?: { state: 'queued' | 'delayed' | 'failed'; inMs: number | null };
}

/** Why a delivery was not acked, ending where its next clause may follow ("Network connection lost." ends in a stop). */
export const whyText = (d: Delivered): string => (d.error ?? '').replace(/\.\s*$/, '');

/** What follows a nacked delivery, for its line: "; delivered again in 10 s", "; its job failed". */
export function nextText(d: Delivered): string {
  if (!d.next) return '';
  if (d.next.state === 'failed') return '; its job failed';
  if (d.next.state === 'queued' || d.next.inMs === null) return '; delivered again at once';
  const s = d.next.inMs / 1000;
  return `; delivered again in ${s < 60 ? `${Math.round(s)} s` : s < 5400 ? `${Math.round(s / 60)} min` : `${Math.round(s / 3600)} h`}`;
}

/** A delivery's outcome as the feed tells it. */
export function deliveryLine(d: Delivered): LogLine {
  const answer = d.status === null ? 'no answer' : `${d.status}`;
  const what =
    d.outcome === 'acked'
      ? 'acked'
      : d.outcome === 'accepted'
        ? d.error
          ? `accepted, but ${d.error}`
          : 'accepted: the receiver finishes it with its delivery token'
        : d.outcome === 'nacked'
          ? `nacked: ${whyText(d)}${nextText(d)}`
          : `refused: ${d.error}`;
  return {
    id: d.id,
    level: (d.outcome === 'acked' || d.outcome === 'accepted') && !d.error ? 'info' : 'warn',
    message: `push attempt ${d.attempt}: ${answer} in ${d.ms} ms${d.batch > 1 ? ` (a batch of ${d.batch})` : ''}, ${what}`,
  };
}
