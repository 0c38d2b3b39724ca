/** Contract values -> the JSON the HTTP routes answer. Bytes become base64; keys are snake_case. */
import { toBase64 } from '../core/bytes.ts';
import type { ErrorBody, Settled } from '../core/settled.ts';
import type { Claimed, Invocation, JournalFrame, JournalPage, Outcome } from '../core/types.ts';

const b64 = (b: Uint8Array | null) => (b === null ? null : toBase64(b));

export const invocationJson = (i: Invocation) => ({
  id: i.id,
  namespace: i.namespace,
  queue: i.queue,
  key: i.key,
  priority: i.priority,
  parent: i.parent,
  envelope: b64(i.envelope),
  state: i.state,
  attempt: i.attempt,
  worker_id: i.workerId,
  lease_until: i.leaseUntil,
  result: b64(i.result),
  error: i.error,
  created_at: i.createdAt,
  updated_at: i.updatedAt,
  started_at: i.startedAt,
  finished_at: i.finishedAt,
});

export const claimedJson = (c: Claimed) => ({
  id: c.id,
  queue: c.queue,
  envelope: toBase64(c.envelope),
  attempt: c.attempt,
  lease_until: c.leaseUntil,
  priority: c.priority,
});

export const frameJson = (f: JournalFrame) => ({
  seq: f.seq,
  kind: f.kind,
  body: toBase64(f.body),
  meta: f.meta,
  attempt: f.attempt,
  final: f.final,
});

export function outcomeJson(o: Outcome | null) {
  if (!o) return null;
  if (o.state === 'succeeded') return { state: o.state, result: b64(o.result) };
  if (o.state === 'failed' || o.state === 'cancelled') return { state: o.state, error: o.error };
  return { state: o.state, timed_out: true };
}

export const pageJson = (p: JournalPage) => ({
  frames: p.frames.map(frameJson),
  next: p.next,
  trimmed_before: p.trimmedBefore,
  done: p.done,
  state: p.state,
  outcome: outcomeJson(p.outcome),
});

/** What the `end` event of a journal stream carries. */
export const endJson = (p: JournalPage) => ({ state: p.state, trimmed_before: p.trimmedBefore, outcome: outcomeJson(p.outcome) });

/** One item of a batch answer: its value as JSON, or its own error. */
export const itemJson = <T, J>(r: Settled<T>, json: (v: T) => J): J | { error: ErrorBody } => (r.ok ? json(r.value) : { error: r.error });
