ALTER TABLE `queues` ADD `sampled` integer DEFAULT 0 NOT NULL;--> statement-breakpoint
-- The level counts are kept only for queues a boltzmann claim has sampled (queues.sampled = 1): a
-- queue that only sees fifo and filo claims pays no count write per job. The insert trigger still
-- creates a level's row the first time (it names the queue's levels, and the queue for listing),
-- but moves its count only when sampled. The first sampling claim recounts the queue's levels once
-- and sets the flag (src/core/sql/claim.ts, markSampledStmts).
DROP TRIGGER `invocations_levels_insert`;
--> statement-breakpoint
DROP TRIGGER `invocations_levels_enter`;
--> statement-breakpoint
DROP TRIGGER `invocations_levels_leave`;
--> statement-breakpoint
DROP TRIGGER `invocations_levels_delete`;
--> statement-breakpoint
CREATE TRIGGER `invocations_levels_insert` AFTER INSERT ON `invocations`
WHEN NEW.state = 'queued'
BEGIN
  INSERT INTO queue_levels (ns, queue, priority, queued) VALUES (NEW.ns, NEW.queue, NEW.priority, 1)
  ON CONFLICT (ns, queue, priority) DO UPDATE SET queued = queued + 1
  WHERE EXISTS (SELECT 1 FROM queues WHERE ns = NEW.ns AND queue = NEW.queue AND sampled = 1);
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
