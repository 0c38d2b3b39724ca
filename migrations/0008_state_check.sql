-- The state CHECK becomes an OR of equalities. SQLite evaluates a constant IN list of more than
-- two values through a temporary table, and D1 counts each pass over it as a row read: one for
-- every row a statement writes (submit, claim, ack: 3 of a plain job's 20 rows read). Changing a
-- CHECK rebuilds the table (drizzle-kit generated, then as in 0005: no PRAGMA foreign_keys, the
-- priority DESC key unquoted, and the triggers, dropped with the old table, made again below,
-- unchanged). The rebuild copies every row once, in the migration's transaction.
CREATE TABLE `__new_invocations` (
	`rid` integer PRIMARY KEY NOT NULL,
	`ns` text NOT NULL,
	`queue` text NOT NULL,
	`id` text NOT NULL,
	`key` text,
	`priority` real DEFAULT 0 NOT NULL,
	`parent` text,
	`envelope` blob NOT NULL,
	`state` text NOT NULL,
	`attempt` integer DEFAULT 0 NOT NULL,
	`worker_id` text,
	`lease_until` integer,
	`result` blob,
	`error` text,
	`created_at` integer NOT NULL,
	`updated_at` integer NOT NULL,
	`started_at` integer,
	`finished_at` integer,
	`trimmed` integer DEFAULT -1 NOT NULL,
	`run_at` integer,
	`expires_at` integer,
	`max_attempts` integer,
	`budget_from` integer DEFAULT 0 NOT NULL,
	CONSTRAINT "invocations_state" CHECK(state = 'delayed' OR state = 'queued' OR state = 'running' OR state = 'succeeded' OR state = 'failed' OR state = 'cancelled')
);
--> statement-breakpoint
INSERT INTO `__new_invocations`("rid", "ns", "queue", "id", "key", "priority", "parent", "envelope", "state", "attempt", "worker_id", "lease_until", "result", "error", "created_at", "updated_at", "started_at", "finished_at", "trimmed", "run_at", "expires_at", "max_attempts", "budget_from") SELECT "rid", "ns", "queue", "id", "key", "priority", "parent", "envelope", "state", "attempt", "worker_id", "lease_until", "result", "error", "created_at", "updated_at", "started_at", "finished_at", "trimmed", "run_at", "expires_at", "max_attempts", "budget_from" FROM `invocations`;--> statement-breakpoint
DROP TABLE `invocations`;--> statement-breakpoint
ALTER TABLE `__new_invocations` RENAME TO `invocations`;--> statement-breakpoint
CREATE UNIQUE INDEX `invocations_ns_id` ON `invocations` (`ns`,`id`);--> statement-breakpoint
CREATE UNIQUE INDEX `invocations_ns_queue_key` ON `invocations` (`ns`,`queue`,`key`) WHERE key IS NOT NULL;--> statement-breakpoint
CREATE INDEX `invocations_queued` ON `invocations` (`ns`,`queue`,priority DESC,`rid`) WHERE state = 'queued';--> statement-breakpoint
CREATE INDEX `invocations_running` ON `invocations` (`ns`,`queue`,`lease_until`) WHERE state = 'running';--> statement-breakpoint
CREATE INDEX `invocations_delayed` ON `invocations` (`ns`,`queue`,`run_at`) WHERE state = 'delayed';--> statement-breakpoint
CREATE INDEX `invocations_expiring` ON `invocations` (`ns`,`queue`,`expires_at`) WHERE expires_at IS NOT NULL AND state IN ('delayed', 'queued');--> statement-breakpoint
CREATE INDEX `invocations_finished` ON `invocations` (`ns`,`queue`,`state`,`rid`) WHERE state IN ('succeeded', 'failed', 'cancelled');--> statement-breakpoint
CREATE TRIGGER `invocations_levels_insert` AFTER INSERT ON `invocations`
WHEN NEW.state IN ('queued', 'delayed')
BEGIN
  INSERT INTO queue_levels (ns, queue, priority, queued) VALUES (NEW.ns, NEW.queue, NEW.priority, NEW.state = 'queued')
  ON CONFLICT (ns, queue, priority) DO UPDATE SET queued = queued + 1
  WHERE NEW.state = 'queued' AND EXISTS (SELECT 1 FROM queues WHERE ns = NEW.ns AND queue = NEW.queue AND sampled = 1);
END;
--> statement-breakpoint
CREATE TRIGGER `invocations_levels_enter` AFTER UPDATE OF state ON `invocations`
WHEN NEW.state = 'queued' AND OLD.state <> 'queued'
  AND EXISTS (SELECT 1 FROM queues WHERE ns = NEW.ns AND queue = NEW.queue AND sampled = 1)
BEGIN
  INSERT INTO queue_levels (ns, queue, priority, queued) VALUES (NEW.ns, NEW.queue, NEW.priority, 1)
  ON CONFLICT (ns, queue, priority) DO UPDATE SET queued = queued + 1;
END;
--> statement-breakpoint
CREATE TRIGGER `invocations_levels_leave` AFTER UPDATE OF state ON `invocations`
WHEN OLD.state = 'queued' AND NEW.state <> 'queued'
  AND EXISTS (SELECT 1 FROM queues WHERE ns = OLD.ns AND queue = OLD.queue AND sampled = 1)
BEGIN
  UPDATE queue_levels SET queued = queued - 1 WHERE ns = OLD.ns AND queue = OLD.queue AND priority = OLD.priority;
END;
--> statement-breakpoint
CREATE TRIGGER `invocations_levels_delete` AFTER DELETE ON `invocations`
WHEN OLD.state = 'queued'
  AND EXISTS (SELECT 1 FROM queues WHERE ns = OLD.ns AND queue = OLD.queue AND sampled = 1)
BEGIN
  UPDATE queue_levels SET queued = queued - 1 WHERE ns = OLD.ns AND queue = OLD.queue AND priority = OLD.priority;
END;
--> statement-breakpoint
CREATE TRIGGER `invocations_dead_letter` AFTER UPDATE OF state ON `invocations`
WHEN NEW.state = 'failed' AND OLD.state <> 'failed'
BEGIN
  INSERT INTO invocations (ns, queue, id, priority, parent, envelope, state, attempt, error, created_at, updated_at)
  SELECT NEW.ns, q.dead_letter_queue, 'dead:' || NEW.id || ':' || NEW.attempt, NEW.priority, NEW.id, NEW.envelope, 'queued', 0, NEW.error,
         NEW.updated_at, NEW.updated_at
    FROM queues q WHERE q.ns = NEW.ns AND q.queue = NEW.queue AND q.dead_letter_queue IS NOT NULL
  ON CONFLICT DO NOTHING;
END;
