/** Stored rows -> contract values. Drivers hand blobs back in different forms; all become Uint8Array. */
import type { InvocationRow } from './schema.ts';
import type { State } from './states.ts';
import type { Invocation, InvocationError, JournalFrame, Outcome } from './types.ts';
import type { FrameKind } from './frame.ts';
import { utf8 } from './bytes.ts';

export function asBytes(v: unknown): Uint8Array | null {
  if (v === null || v === undefined) return null;
  if (v instanceof Uint8Array) return v;
  if (typeof v === 'string') return utf8(v); // an envelope stored as text (sql/submit.ts)
  if (v instanceof ArrayBuffer) return new Uint8Array(v);
  if (Array.isArray(v)) return Uint8Array.from(v as number[]);
  if (ArrayBuffer.isView(v)) return new Uint8Array(v.buffer, v.byteOffset, v.byteLength);
  throw new TypeError(`expected a blob, got ${typeof v}`);
}

export function parseError(v: unknown): InvocationError | null {
  if (typeof v !== 'string') return null;
  try {
    const e = JSON.parse(v) as unknown;
    if (e && typeof e === 'object' && typeof (e as InvocationError).message === 'string') return e as InvocationError;
  } catch {
    /* stored by an older writer as plain text */
  }
  return { message: v };
}

const num = (v: unknown): number | null => (v === null || v === undefined ? null : Number(v));

export function toInvocation(r: Record<string, unknown>): Invocation {
  const row = r as unknown as InvocationRow;
  return {
    id: row.id,
    namespace: row.ns,
    queue: row.queue,
    key: row.key ?? null,
    priority: Number(row.priority),
    parent: row.parent ?? null,
    envelope: asBytes(row.envelope) ?? new Uint8Array(),
    state: row.state as State,
    attempt: Number(row.attempt),
    workerId: row.worker_id ?? null,
    leaseUntil: num(row.lease_until),
    result: asBytes(row.result),
    error: parseError(row.error),
    createdAt: Number(row.created_at),
    updatedAt: Number(row.updated_at),
    startedAt: num(row.started_at),
    finishedAt: num(row.finished_at),
    runAt: num(row.run_at),
    expiresAt: num(row.expires_at),
    maxAttempts: num(row.max_attempts),
  };
}

export function outcomeOf(r: { state: unknown; result?: unknown; error?: unknown }): Outcome {
  const state = r.state as State;
  if (state === 'succeeded') return { state, result: asBytes(r.result) };
  if (state === 'failed' || state === 'cancelled') return { state, error: parseError(r.error) ?? { message: state } };
  return { state: state as 'delayed' | 'queued' | 'running', timedOut: true };
}

export function toJournalFrame(r: Record<string, unknown>): JournalFrame {
  return {
    kind: Number(r.kind) as FrameKind,
    seq: Number(r.seq),
    body: asBytes(r.body) ?? new Uint8Array(),
    meta: typeof r.meta === 'string' ? (JSON.parse(r.meta) as Record<string, unknown>) : null,
    attempt: Number(r.attempt),
    final: Number(r.final) === 1,
  };
}
