/**
 * Request bodies of the HTTP contract, declared once: each is a TypeScript type of what travels
 * (wire-types.ts; the HTTP client builds its bodies as these types) and a zod schema here that
 * checks it on the plane. `Checks<T>` ties the two: a schema whose input differs from its type
 * does not compile.
 *
 * Bytes travel as base64 strings; the schemas decode them, so a bad one is refused with the path
 * of the field (`items[3].envelope`). Every other field is checked again by the engine, so both
 * planes give the same errors for the same input. Objects are strict: a body that tries to set
 * a server-owned field (state, attempt, namespace) is refused, not silently ignored. Free-form
 * values (`meta`, an error object) pass through untouched, own `__proto__` keys included.
 */
import * as z from 'zod/mini';
import en from 'zod/v4/locales/en.js';
import { fromBase64 } from './bytes.ts';
import type { ClaimKindName } from './types.ts';
import type {
  SubmitWire,
  AckWire,
  ClaimWire,
  ClaimCancelWire,
  ReleaseWire,
  GetManyWire,
  ResultsWire,
  WorkerLogWire,
  QueueSettingsWire,
  RedriveWire,
  PurgeWire,
  ScheduleWire,
  TokenWire,
  StreamTokenWire,
  AckBodyWire,
  NackWire,
  HeartbeatWire,
  AppendWire,
} from './wire-types.ts';

export type * from './wire-types.ts';

// zod/mini: the schemas' functional form, which a bundle tree-shakes (the Worker carries ~50 KiB of
// zod, not ~700); its English messages are loaded once, here, and nothing else of its locales.
z.config(en());

/** A schema whose input type is exactly T (both ways). */
type Checks<T> = z.ZodMiniType<unknown, T>;
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
const exactly =
  <T>() =>
  <S extends Checks<T>>(s: S & (Same<z.input<S>, T> extends true ? unknown : never)): S =>
    s;

const opt = <T extends z.ZodMiniType>(t: T) => z.nullish(t);

/** What a value that is not a string is, in a message. */
const kindOf = (v: unknown) =>
  v === null ? 'null' : Array.isArray(v) ? 'an array' : typeof v === 'object' ? 'an object' : `a ${typeof v}`;

const b64 = z.pipe(
  // An envelope sent as the JSON it holds is the mistake most made here: say what goes instead.
  z.string({ error: (iss) => `must be base64: a string of the bytes, base64-encoded, not ${kindOf(iss.input)}` }),
  z.transform((s: string, ctx) => {
    const b = fromBase64(s);
    if (b) return b;
    ctx.issues.push({ code: 'custom', message: 'must be base64', input: s });
    return z.NEVER;
  }),
);

/** A JSON object kept as it came (zod would rebuild it, and drop own `__proto__` keys). */
const freeObject = <T extends object = Record<string, unknown>>(
  test: (o: Record<string, unknown>) => boolean = () => true,
  message = 'must be an object',
) => z.custom<T>((v) => typeof v === 'object' && v !== null && !Array.isArray(v) && test(v as Record<string, unknown>), { message });

export const SubmitBody = exactly<SubmitWire>()(
  z.strictObject({
    id: z.string(),
    envelope: b64,
    key: opt(z.string()),
    priority: opt(z.number()),
    parent: opt(z.string()),
    delay_ms: opt(z.number()),
    run_at: opt(z.number()),
    ttl_ms: opt(z.number()),
    expires_at: opt(z.number()),
    max_attempts: opt(z.number()),
  }),
);
export const SubmitManyBody = exactly<{ items: SubmitWire[] }>()(z.strictObject({ items: z.array(SubmitBody) }));

const AckItemBody = exactly<AckWire>()(z.strictObject({ id: z.string(), attempt: opt(z.number()), result: opt(b64) }));

export const ClaimBody = exactly<ClaimWire>()(
  z.strictObject({
    worker_id: z.string(),
    // Any value: the core's check (validate.ts, claimKind) refuses an unknown kind in the words
    // every plane uses.
    kind: opt(z.custom<ClaimKindName>(() => true)),
    temperature: opt(z.number()),
    lease_ms: opt(z.number()),
    wait_ms: opt(z.number()),
    max: opt(z.number()),
    acks: opt(z.array(AckItemBody)),
    claim_id: opt(z.string()),
    worker: opt(
      z.strictObject({
        queues: opt(z.array(z.string())),
        host: opt(z.string()),
        pid: opt(z.number()),
        version: opt(z.string()),
        concurrency: opt(z.number()),
      }),
    ),
  }),
);

export const GetManyBody = exactly<GetManyWire>()(z.strictObject({ ids: z.array(z.string()) }));

export const ResultsBody = exactly<ResultsWire>()(
  z.strictObject({ ids: z.array(z.string()), timeout_ms: opt(z.number()), after: opt(z.string()) }),
);

export const ClaimCancelBody = exactly<ClaimCancelWire>()(z.strictObject({ worker_id: z.string(), claim_id: z.string() }));

/** Shapes only: the core checks the ids, the worker id and each attempt in its own words. */
export const ReleaseBody = exactly<ReleaseWire>()(
  z.strictObject({ worker_id: z.string(), items: z.array(z.strictObject({ id: z.string(), attempt: z.nullable(z.number()) })) }),
);

export const WorkerLogBody = exactly<WorkerLogWire>()(
  z.strictObject({
    lines: z.array(
      z.strictObject({ id: z.string(), level: z.string(), message: z.string(), trace_id: opt(z.string()), at: opt(z.number()) }),
    ),
  }),
);

const holder = { worker_id: z.string(), attempt: opt(z.number()) };
/** A single item's holder: with a delivery token the token names it (src/worker/holder.ts), else the engine requires worker_id. */
const single = { worker_id: opt(z.string()), attempt: opt(z.number()) };

export const AckBody = exactly<AckBodyWire>()(z.strictObject({ ...single, result: opt(b64) }));
export const AckManyBody = exactly<{ items: (AckBodyWire & { id: string; worker_id: string })[] }>()(
  z.strictObject({ items: z.array(z.strictObject({ id: z.string(), ...holder, result: opt(b64) })) }),
);

const errorValue = z.union([
  z.string(),
  freeObject<{ message: string; [k: string]: unknown }>(
    (o) => typeof o.message === 'string',
    'must be a string or an object with a string message',
  ),
]);
const nack = { ...holder, error: errorValue, retry: opt(z.boolean()), delay_ms: opt(z.number()), max_attempts: opt(z.number()) };
export const NackBody = exactly<NackWire>()(z.strictObject({ ...nack, ...single }));
export const NackManyBody = exactly<{ items: (NackWire & { id: string; worker_id: string })[] }>()(
  z.strictObject({ items: z.array(z.strictObject({ id: z.string(), ...nack })) }),
);

export const HeartbeatBody = exactly<HeartbeatWire>()(z.strictObject({ ...single, lease_ms: opt(z.number()) }));

export const AppendBody = exactly<AppendWire>()(
  z.strictObject({ ...single, seq: opt(z.number()), kind: z.number(), body: b64, meta: opt(freeObject()), final: opt(z.boolean()) }),
);

export const MoveBody = exactly<{ to: string }>()(z.strictObject({ to: z.string() }));

export const TrimBody = exactly<{ keep_last: number }>()(z.strictObject({ keep_last: z.number() }));

export const QueueSettingsBody = exactly<QueueSettingsWire>()(
  z.strictObject({
    lease_ms: opt(z.number()),
    max_attempts: opt(z.number()),
    max_running: opt(z.number()),
    claims_per_second: opt(z.number()),
    retry_backoff: opt(
      z.strictObject({ initial_ms: opt(z.number()), factor: opt(z.number()), max_ms: opt(z.number()), jitter: opt(z.number()) }),
    ),
    dead_letter_queue: opt(z.string()),
    ttl_ms: opt(z.number()),
    retention_ms: opt(z.number()),
    journal_retention_ms: opt(z.number()),
    time_limit_ms: opt(z.number()),
    push: opt(
      z.strictObject({
        url: z.string(),
        concurrency: opt(z.number()),
        timeout_ms: opt(z.number()),
        batch_size: opt(z.number()),
        rotate_secret: opt(z.boolean()),
      }),
    ),
  }),
);

export const RedriveBody = exactly<RedriveWire>()(
  z.strictObject({
    limit: opt(z.number()),
    state: opt(z.literal('failed', { error: 'state must be "failed": only failed jobs are redriven' })),
    dead_letters: opt(z.boolean()),
  }),
);

export const PurgeBody = exactly<PurgeWire>()(
  z.strictObject({
    state: z.enum(['succeeded', 'failed', 'cancelled'], {
      error: 'state must be one of succeeded, failed, cancelled: only finished jobs are purged',
    }),
    limit: opt(z.number()),
  }),
);

export const ScheduleBody = exactly<ScheduleWire>()(
  z.strictObject({ cron: z.string(), timezone: opt(z.string()), envelope: b64, priority: opt(z.number()) }),
);

const limit = z.int().check(z.minimum(1), z.maximum(1_000_000));
export const StreamTokenBody = exactly<StreamTokenWire>()(z.strictObject({ ttl_ms: opt(z.number()), streams: opt(z.number()) }));

export const TokenBody = exactly<TokenWire>()(
  z.strictObject({
    role: z.string(),
    pools: opt(z.array(z.string())),
    name: opt(z.string()),
    limits: opt(z.strictObject({ requests_per_second: z.optional(limit), request_burst: z.optional(limit), streams: z.optional(limit) })),
  }),
);
