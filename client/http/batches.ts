/**
 * The verbs that travel many to a request: submits, acks and nacks of one queue, each item fenced
 * and answered on its own, and a batch larger than one request allows sent in parts (inParts).
 */
import { toBase64 } from '../../src/core/bytes.ts';
import type * as wire from '../../src/core/wire-types.ts';
import { errorFor } from '../errors.ts';
import type { ClaimOptions, SubmitOptions } from '../types.ts';
import type { Transport } from './transport.ts';
import { inParts, PART_BYTES, PART_ITEMS, queuePath, settledOf, type Json } from './wire.ts';

export type SubmitItem = { envelope: Uint8Array; opts: SubmitOptions };
export type AckItem = { id: string; workerId: string; attempt: number | null; result: Uint8Array | null };
export type NackItem = {
  id: string;
  workerId: string;
  attempt: number | null;
  error: string | { message: string; [k: string]: unknown };
  retry: boolean;
  delayMs: number | null;
  maxAttempts: number | null;
};

const failedItem = (error: Error) => ({ ok: false as const, error });

export /** A submit as it travels. */
const submitWire = (envelope: Uint8Array, opts: SubmitOptions): wire.SubmitWire => ({
  id: opts.id,
  envelope: toBase64(envelope),
  key: opts.key ?? null,
  priority: opts.priority ?? 0,
  parent: opts.parent ?? null,
  delay_ms: opts.delayMs,
  run_at: opts.runAt,
  ttl_ms: opts.ttlMs,
  expires_at: opts.expiresAt,
  max_attempts: opts.maxAttempts,
});

/** Submits of one queue, in as few requests as their sizes allow; each answers its id or its error. */
export function submitParts(http: Transport, queue: string, items: SubmitItem[]): Promise<({ id: string } | { error: Error })[]> {
  const wires = items.map(({ envelope, opts }) => submitWire(envelope, opts));
  const size = (w: wire.SubmitWire) => w.envelope.length + w.id.length + (w.key?.length ?? 0) + (w.parent?.length ?? 0) + 80;
  return inParts<wire.SubmitWire, { id: string } | { error: Error }>(
    wires,
    size,
    async (part) => {
      const out = await http.call('POST', `${queuePath(queue)}/invocations/batch`, { items: part } satisfies {
        items: wire.SubmitWire[];
      });
      return (out.results as Json[]).map((r) => {
        if (!r.error) return { id: String(r.id) };
        const e = r.error as { code: string; message: string };
        return { error: errorFor(e.code, e.message) };
      });
    },
    (error) => ({ error }),
  );
}

/** Acks of one queue's invocations. */
export function ackParts(http: Transport, queue: string, items: AckItem[]) {
  const wires: (wire.AckBodyWire & { id: string; worker_id: string })[] = items.map((a) => ({
    id: a.id,
    worker_id: a.workerId,
    attempt: a.attempt,
    result: a.result ? toBase64(a.result) : null,
  }));
  const size = (w: (typeof wires)[number]) => (w.result?.length ?? 0) + w.id.length + w.worker_id.length + 60;
  return inParts(
    wires,
    size,
    async (part) => settledOf((await http.call('POST', `${queuePath(queue)}/ack`, { items: part })).results as Json[]),
    failedItem,
  );
}

/** Nacks of one queue's invocations. */
export function nackParts(http: Transport, queue: string, items: NackItem[]) {
  const wires: (wire.NackWire & { id: string })[] = items.map((n) => ({
    id: n.id,
    worker_id: n.workerId,
    attempt: n.attempt,
    error: n.error,
    retry: n.retry,
    delay_ms: n.delayMs,
    max_attempts: n.maxAttempts,
  }));
  const size = (w: (typeof wires)[number]) => JSON.stringify(w).length;
  return inParts(
    wires,
    size,
    async (part) => settledOf((await http.call('POST', `${queuePath(queue)}/nack`, { items: part })).results as Json[]),
    failedItem,
  );
}

/** A claim as it travels. */
export const claimWire = (workerId: string, max: number, opts: ClaimOptions): wire.ClaimWire => ({
  worker_id: workerId,
  kind: opts.kind ?? 'fifo',
  temperature: opts.temperature ?? 1,
  wait_ms: opts.waitMs ?? 0,
  lease_ms: opts.leaseMs ?? null,
  max,
  worker: opts.worker ?? null,
});

/** How many of these acks (in order) fit in one claim request beside it; the rest go first, as batch acks. */
export function ridingAcks(items: { id: string; result: string | null }[]): number {
  let fit = 0;
  for (
    let bytes = 0;
    fit < Math.min(items.length, PART_ITEMS) && (bytes += (items[fit]!.result?.length ?? 0) + items[fit]!.id.length + 60) <= PART_BYTES;
    fit++
  );
  return fit;
}
