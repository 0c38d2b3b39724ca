/** Contract values -> JSON answers. Bytes become base64; keys are snake_case. */
import { toBase64 } from '../core/bytes.ts';
import type { Claimed, Invocation } from '../core/types.ts';

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
