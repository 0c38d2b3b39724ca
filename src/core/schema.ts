/**
 * The stored schema, in drizzle-orm. `drizzle-kit generate` turns it into the SQL migrations in
 * /migrations; the transition SQL in ./sql is written against these tables and columns.
 * Column keys are the column names, so `$inferSelect` is exactly the shape a raw row comes back in.
 */
import { sql } from 'drizzle-orm';
import { blob, check, index, integer, primaryKey, real, sqliteTable, text, uniqueIndex } from 'drizzle-orm/sqlite-core';
import { FINISHED } from './sql/finished.ts';

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
    /** delayed | queued | running | succeeded | failed | cancelled. */
    state: text('state').notNull(),
    /** Claims so far. */
    attempt: integer('attempt').notNull().default(0),
    /**
     * Before migration 0018, the worker by name; since, null (a row's `worker` names it). A row
     * claimed before the migration keeps its name here until retention removes it: the migration
     * rewrites no row (a D1 statement may run 30 s at most, and a full shard holds tens of millions
     * of rows), and a Worker of before it, still running while a deploy goes out, writes it here.
     */
    worker_id: text('worker_id'),
    /**
     * Worker holding the running attempt (or that held the last one): its number among the
     * namespace's workers (`workers.n`), whose name is kept once there. A worker id is often a
     * host name and a pid (30-40 bytes); a number takes one or two, on every job it ever ran.
     */
    worker: integer('worker'),
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
    /** While delayed: epoch ms from which the row may be claimed (it is then moved to queued). */
    run_at: integer('run_at'),
    /** Epoch ms after which a row still waiting (delayed or queued) fails as Expired; null: never. */
    expires_at: integer('expires_at'),
    /** This invocation's attempt budget; null: the queue's, else the plane's. */
    max_attempts: integer('max_attempts'),
    /** Attempts spent before the last explicit retry: the budget counts the attempts since. */
    budget_from: integer('budget_from').notNull().default(0),
  },
  (t) => [
    // An OR of equalities, not IN: SQLite checks a constant IN list of more than two values
    // through a temporary table, which D1 counts as a row read for every row a statement writes
    // (migration 0008).
    check(
      'invocations_state',
      sql`state = 'delayed' OR state = 'queued' OR state = 'running' OR state = 'succeeded' OR state = 'failed' OR state = 'cancelled'`,
    ),
    uniqueIndex('invocations_ns_id').on(t.ns, t.id),
    uniqueIndex('invocations_ns_queue_key').on(t.ns, t.queue, t.key).where(sql`key IS NOT NULL`),
    // Claims: the queued rows of one queue in claim order. Partial, so a claim reads the same few
    // index entries at any depth, and finished rows cost nothing here.
    index('invocations_queued').on(t.ns, t.queue, sql`priority DESC`, t.rid).where(sql`state = 'queued'`),
    // Lease expiry: the running rows of one queue by deadline.
    index('invocations_running').on(t.ns, t.queue, t.lease_until).where(sql`state = 'running'`),
    // Delays: the delayed rows of one queue by due time, so the due ones move to queued in one
    // guarded statement that reads only them; a plain job never enters it.
    index('invocations_delayed').on(t.ns, t.queue, t.run_at).where(sql`state = 'delayed'`),
    // TTL: the waiting rows that have one, by deadline; rows without a TTL never enter it.
    index('invocations_expiring').on(t.ns, t.queue, t.expires_at).where(sql`expires_at IS NOT NULL AND state IN ('delayed', 'queued')`),
    // The finished rows of one queue, per state in submit order: a listing of failed, succeeded or
    // cancelled jobs (newest first) reads one page of it at any depth, retry and redrive take the
    // oldest failed ones, and retention purges the oldest finished ones. Each finished job pays
    // one index entry for it (a plain job writes 7 D1 rows, 6 before it).
    index('invocations_finished').on(t.ns, t.queue, t.state, t.rid).where(sql.raw(FINISHED)),
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

/**
 * The workers of a namespace that ever claimed, each numbered once: a job's row holds the number
 * (`invocations.worker`), the name is here. A claim registers its worker (`sql/workers.ts`) in the
 * batch that claims, unless the engine has seen it registered. Kept with the namespace (a move
 * copies it); a few rows a worker process, never purged.
 */
export const workers = sqliteTable(
  'workers',
  {
    ns: text('ns').notNull(),
    /** 1, 2, ... in the order the namespace's workers first claimed. */
    n: integer('n').notNull(),
    /** The worker id as the worker gave it. */
    name: text('name').notNull(),
  },
  (t) => [primaryKey({ columns: [t.ns, t.n] }), uniqueIndex('workers_ns_name').on(t.ns, t.name)],
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
    /** 1 while paused: submits are accepted, claims hand out nothing. */
    paused: integer('paused').notNull().default(0),
    /** Most of the queue's invocations running at once, across all workers; null: no cap. */
    max_running: integer('max_running'),
    /** Claims handed out per second at most (a token bucket in this row); null: no limit. */
    claims_per_second: real('claims_per_second'),
    /** The bucket's tokens, as of `claim_tokens_at`. */
    claim_tokens: real('claim_tokens'),
    claim_tokens_at: integer('claim_tokens_at'),
    /** JSON {initial_ms, factor, max_ms, jitter, delays: [ms per attempt]}: the delay before a retry; null: none. */
    backoff: text('backoff'),
    /** Queue a job that fails for good is also submitted to (a dead letter); null: none. */
    dead_letter_queue: text('dead_letter_queue'),
    /** Default TTL of a submit that names none, in ms; null: none. */
    ttl_ms: integer('ttl_ms'),
    /** How long finished jobs (and their frames) are kept, in ms; null: the plane's default (7 days). */
    retention_ms: integer('retention_ms'),
    /**
     * How long a finished job's frames are kept, in ms, when that is shorter than the job itself
     * (retention_ms): then the retention pass removes them, the job's row (state, result, error)
     * staying. Null: frames go with their job.
     */
    journal_retention_ms: integer('journal_retention_ms'),
    /** The time limit of the queue's jobs that name none, in ms, told to workers; null: theirs (600 s by default). */
    time_limit_ms: integer('time_limit_ms'),
    /** Push delivery (core/push.ts): the URL the queue's jobs are POSTed to; null: workers pull. */
    push_url: text('push_url'),
    /** Most deliveries in flight at once (within max_running). */
    push_concurrency: integer('push_concurrency'),
    /** How long one delivery's request may take, in ms. */
    push_timeout_ms: integer('push_timeout_ms'),
    push_batch_size: integer('push_batch_size'),
    /** The `whsec_` secret deliveries are signed with (Standard Webhooks); never read back by a route. */
    push_secret: text('push_secret'),
    /** The secret before the last rotation: deliveries are signed with both until `push_secret_old_until`. */
    push_secret_old: text('push_secret_old'),
    push_secret_old_until: integer('push_secret_old_until'),
  },
  (t) => [primaryKey({ columns: [t.ns, t.queue] })],
);

/**
 * The local planes' lifecycle feed, shared by every process on one file (client/local/feed-log.ts,
 * Python's feed_log.py): each process puts the records of its transitions in the place each
 * took inside its own transaction (a slot, record '', filled with a JSON array once it committed),
 * and every reader follows the table by `seq`. The edge plane's feed lives in its queue
 * objects instead; on D1 this table stays empty.
 */
export const localFeed = sqliteTable(
  'local_feed',
  {
    seq: integer('seq').primaryKey({ autoIncrement: true }),
    ns: text('ns').notNull(),
    queue: text('queue').notNull(),
    /** The record as JSON: {kind: "job" | "worker", ...} (src/core/feed.ts). */
    record: text('record').notNull(),
  },
  (t) => [index('local_feed_ns').on(t.ns, t.seq)],
);

/**
 * Who reads a local plane's feed: a process writes its records to `local_feed` only while some
 * reader of the namespace is here (each renews its row every second; it lapses 5 s after the last).
 */
export const localFeedReaders = sqliteTable('local_feed_readers', {
  reader: text('reader').primaryKey(),
  ns: text('ns').notNull(),
  /** Epoch ms: the row stands until then. */
  until: integer('until').notNull(),
});

/**
 * The finished jobs whose frames their queue keeps for less than the jobs (journal_retention_ms),
 * by when they finished: a row per job that finished with frames while its queue had that setting,
 * put here by a trigger on the finish and gone with the frames (sql/purge.ts), or with the job (a
 * retry by hand, a deletion). So the retention pass finds the frames that are due, oldest first,
 * without walking every finished job.
 */
export const journalsDue = sqliteTable(
  'journals_due',
  {
    /** invocations.rid of the finished job. */
    inv: integer('inv').primaryKey(),
    ns: text('ns').notNull(),
    queue: text('queue').notNull(),
    finished_at: integer('finished_at').notNull(),
  },
  (t) => [index('journals_due_at').on(t.ns, t.queue, t.finished_at)],
);

/** Cron schedules: each tick submits the envelope to the queue, keyed `schedule:<name>:<tick time>`. */
export const schedules = sqliteTable(
  'schedules',
  {
    ns: text('ns').notNull(),
    queue: text('queue').notNull(),
    name: text('name').notNull(),
    /** A cron expression (croner: 5 or 6 fields). */
    cron: text('cron').notNull(),
    /** IANA time zone the expression is read in; null: UTC. */
    timezone: text('timezone'),
    envelope: blob('envelope', { mode: 'buffer' }).notNull(),
    priority: real('priority').notNull().default(0),
    /** The next tick to submit, epoch ms. */
    next_at: integer('next_at').notNull(),
    /** The last tick submitted, epoch ms; null: none yet. */
    last_at: integer('last_at'),
    created_at: integer('created_at').notNull(),
    updated_at: integer('updated_at').notNull(),
  },
  (t) => [primaryKey({ columns: [t.ns, t.queue, t.name] }), index('schedules_due').on(t.ns, t.queue, t.next_at)],
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

/**
 * The directory: the shard (a D1 database, by its binding: DB, DB_1, DB_2, ...) that each
 * namespace lives on, all its rows there. Read and written in the home database (binding DB)
 * only; every shard has the table (one set of migrations), empty elsewhere. A namespace is placed
 * on its first use, on the shard with the most room (src/durable/directory.ts). `moving` while a
 * move copies it to another shard, its writes fenced (src/durable/mover.ts).
 */
export const namespaces = sqliteTable('namespaces', {
  ns: text('ns').primaryKey(),
  /** The D1 binding of its shard. */
  shard: text('shard').notNull(),
  /** active | moving. */
  state: text('state').notNull().default('active'),
  /** Bumped by each move: a queue object fenced at one epoch resumes only at a later one. */
  epoch: integer('epoch').notNull().default(0),
  /** Epoch ms it was placed (0: it had rows before the plane had shards). */
  placed_at: integer('placed_at').notNull(),
});

/** Each queue object that ever started, by namespace (home database): what a move must fence. */
export const namespaceQueues = sqliteTable(
  'namespace_queues',
  {
    ns: text('ns').notNull(),
    queue: text('queue').notNull(),
  },
  (t) => [primaryKey({ columns: [t.ns, t.queue] })],
);
