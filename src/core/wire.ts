/**
 * Request bodies of the HTTP contract, declared once. Bytes travel as base64 strings; every other
 * field is checked again by the engine, so both planes give the same errors for the same input.
 * Objects are strict: a body that tries to set a server-owned field (state, attempt, namespace)
 * is refused, not silently ignored.
 */
import { z } from 'zod';

const b64 = z.string().describe('base64');
const opt = <T extends z.ZodType>(t: T) => t.nullish();

export const SubmitBody = z.strictObject({
  id: z.string(),
  envelope: b64,
  key: opt(z.string()),
  priority: opt(z.number()),
  parent: opt(z.string()),
});

export const SubmitManyBody = z.strictObject({ items: z.array(SubmitBody) });

export const ClaimBody = z.strictObject({
  worker_id: z.string(),
  kind: opt(z.string()),
  temperature: opt(z.number()),
  lease_ms: opt(z.number()),
  wait_ms: opt(z.number()),
  max: opt(z.number()),
  /** Acks of this worker's finished invocations of the queue, sent with the claim (see ackAndClaim). */
  acks: opt(z.array(z.strictObject({ id: z.string(), attempt: opt(z.number()), result: opt(b64) }))),
});

const Holder = {
  worker_id: z.string(),
  attempt: opt(z.number()),
};

export const AckBody = z.strictObject({ ...Holder, result: opt(b64) });
export const AckManyBody = z.strictObject({ items: z.array(z.strictObject({ id: z.string(), ...Holder, result: opt(b64) })) });
export const NackBody = z.strictObject({
  ...Holder,
  error: z.union([z.string(), z.looseObject({ message: z.string() })]),
  retry: opt(z.boolean()),
});
export const NackManyBody = z.strictObject({
  items: z.array(z.strictObject({ id: z.string(), ...Holder, error: z.union([z.string(), z.looseObject({ message: z.string() })]), retry: opt(z.boolean()) })),
});
export const HeartbeatBody = z.strictObject({ ...Holder, lease_ms: opt(z.number()) });
export const AppendBody = z.strictObject({
  ...Holder,
  seq: opt(z.number()),
  kind: z.number(),
  body: b64,
  meta: opt(z.record(z.string(), z.unknown())),
  final: opt(z.boolean()),
});
export const TrimBody = z.strictObject({ keep_last: z.number() });
export const QueueSettingsBody = z.strictObject({ lease_ms: opt(z.number()), max_attempts: opt(z.number()) });

export type SubmitBody = z.infer<typeof SubmitBody>;
