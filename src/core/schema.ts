/**
 * The stored schema, in drizzle-orm. `drizzle-kit generate` turns it into the SQL migrations in
 * /migrations; the transition SQL in ./sql is written against these tables and columns.
 * Column keys are the column names, so `$inferSelect` is exactly the shape a raw row comes back in.
 */
import { sql } from 'drizzle-orm';
import { blob, check, index, integer, primaryKey, real, sqliteTable, text, uniqueIndex } from 'drizzle-orm/sqlite-core';

export const invocations = sqliteTable(
  'invocations',
  {
    /** Row number, assigned in submit order: the fifo/filo tie-break and the journal's foreign key. */
    rid: integer('rid').primaryKey(),
    /** Owning namespace (tenant). */
    ns: text('ns').notNull(),
    /** Queue (pool) name within the namespace. */
    queue: text('queue').notNull(),
    /** Caller-supplied id, unique per namespace. */
    id: text('id').notNull(),
    /** Optional idempotency key, unique per (ns, queue). */
    key: text('key'),
    /** Claim order: higher first. Boltzmann claims weight by exp(priority / T). */
    priority: real('priority').notNull().default(0),
    /** Id of the invocation that submitted this one. */
    parent: text('parent'),
    /** Opaque payload bytes. */
    envelope: blob('envelope', { mode: 'buffer' }).notNull(),
    /** queued | running | succeeded | failed | cancelled. */
    state: text('state').notNull(),
    /** Claims so far. */
    attempt: integer('attempt').notNull().default(0),
    /** Worker holding the running attempt. */
    worker_id: text('worker_id'),
    /** Epoch ms at which the running attempt's lease expires. */
    lease_until: integer('lease_until'),
    /** Opaque result bytes of a succeeded invocation. */
    result: blob('result', { mode: 'buffer' }),
    /** JSON text of the error of a failed or cancelled invocation. */
    error: text('error'),
    created_at: integer('created_at').notNull(),
    updated_at: integer('updated_at').notNull(),
    /** When the current attempt was claimed. */
    started_at: integer('started_at'),
    /** When the row became terminal. */
    finished_at: integer('finished_at'),
    /** Highest journal seq removed by a trim; -1 while nothing was trimmed. */
    trimmed: integer('trimmed').notNull().default(-1),
  },
  (t) => [
    check('invocations_state', sql`state IN ('queued', 'running', 'succeeded', 'failed', 'cancelled')`),
    uniqueIndex('invocations_ns_id').on(t.ns, t.id),
    uniqueIndex('invocations_ns_queue_key').on(t.ns, t.queue, t.key).where(sql`key IS NOT NULL`),
    // Claims: the queued rows of one queue in claim order. Partial, so a claim reads the same few
    // index entries at any depth, and finished rows cost nothing here.
    index('invocations_queued').on(t.ns, t.queue, sql`priority DESC`, t.rid).where(sql`state = 'queued'`),
    // Lease expiry: the running rows of one queue by deadline.
    index('invocations_running').on(t.ns, t.queue, t.lease_until).where(sql`state = 'running'`),
  ],
);

export const frames = sqliteTable(
  'frames',
  {
    /** invocations.rid of the invocation this frame belongs to. */
    inv: integer('inv').notNull(),
    /** Position in the journal, from 0, unique per invocation across attempts. */
    seq: integer('seq').notNull(),
    /** FrameKind: VALUE=0 CHUNK=1 BEGIN=2 END=3 ERROR=4. */
    kind: integer('kind').notNull(),
    /** Opaque frame body. */
    body: blob('body', { mode: 'buffer' }).notNull(),
    /** JSON text of the frame's meta object, or null. */
    meta: text('meta'),
    /** The attempt whose worker wrote the frame. */
    attempt: integer('attempt').notNull(),
    /** 1 when this frame ends the stream. */
    final: integer('final').notNull().default(0),
    created_at: integer('created_at').notNull(),
  },
  (t) => [primaryKey({ columns: [t.inv, t.seq] })],
);

/** Per-queue settings; a queue without a row uses the plane's defaults. */
export const queues = sqliteTable(
  'queues',
  {
    ns: text('ns').notNull(),
    queue: text('queue').notNull(),
    /** Lease given to a claim when the claim names none. */
    lease_ms: integer('lease_ms'),
    /** Claims after which an expired lease fails the invocation instead of requeueing it. */
    max_attempts: integer('max_attempts'),
    updated_at: integer('updated_at').notNull(),
    /** 1 once a boltzmann claim sampled the queue: from then on its `queue_levels` counts are kept. */
    sampled: integer('sampled').notNull().default(0),
  },
  (t) => [primaryKey({ columns: [t.ns, t.queue] })],
);

/**
 * How many rows of each queue wait at each priority. It lets a boltzmann claim weigh priority
 * levels in O(levels) rows instead of counting the whole queue. Triggers on `invocations` (see
 * migrations 0001 and 0004) move the count in the same statement as the row it counts, but only
 * for queues a boltzmann claim has sampled (`queues.sampled`): the first such claim recounts the
 * queue's levels once. A queue that only sees fifo and filo claims writes no counts; its rows
 * here just name its levels (and the queue, for listing).
 */
export const queueLevels = sqliteTable(
  'queue_levels',
  {
    ns: text('ns').notNull(),
    queue: text('queue').notNull(),
    priority: real('priority').notNull(),
    queued: integer('queued').notNull(),
  },
  (t) => [primaryKey({ columns: [t.ns, t.queue, t.priority] })],
);

export type InvocationRow = typeof invocations.$inferSelect;

/**
 * Namespace-scoped bearer tokens. Only a SHA-256 digest of each token is stored; the token
 * itself is shown once, when it is created. `id` is the token's visible prefix.
 */
export const tokens = sqliteTable('tokens', {
  /** Public id, the visible part of the token (`lsk_<id>_<secret>`). */
  id: text('id').primaryKey(),
  ns: text('ns').notNull(),
  /** producer | worker | admin. */
  role: text('role').notNull(),
  /** JSON array of the pools a worker token may serve; null for all. */
  pools: text('pools'),
  /** A label for people. */
  name: text('name'),
  /** Hex SHA-256 of the whole token. */
  digest: text('digest').notNull(),
  created_at: integer('created_at').notNull(),
  /** When it was revoked; a revoked token is refused at once. */
  revoked_at: integer('revoked_at'),
  /** JSON {requests_per_second, request_burst, streams}: this token's own limits; null for the plane's. */
  limits: text('limits'),
});
