-- queue_levels counts the queued rows of each (ns, queue, priority). These triggers move the count
-- in the same statement that moves the row, so it can never drift from the rows it counts.
CREATE TRIGGER `invocations_levels_insert` AFTER INSERT ON `invocations`
WHEN NEW.state = 'queued'
BEGIN
  INSERT INTO queue_levels (ns, queue, priority, queued) VALUES (NEW.ns, NEW.queue, NEW.priority, 1)
  ON CONFLICT (ns, queue, priority) DO UPDATE SET queued = queued + 1;
END;
--> statement-breakpoint
CREATE TRIGGER `invocations_levels_enter` AFTER UPDATE OF state ON `invocations`
WHEN NEW.state = 'queued' AND OLD.state <> 'queued'
BEGIN
  INSERT INTO queue_levels (ns, queue, priority, queued) VALUES (NEW.ns, NEW.queue, NEW.priority, 1)
  ON CONFLICT (ns, queue, priority) DO UPDATE SET queued = queued + 1;
END;
--> statement-breakpoint
CREATE TRIGGER `invocations_levels_leave` AFTER UPDATE OF state ON `invocations`
WHEN OLD.state = 'queued' AND NEW.state <> 'queued'
BEGIN
  UPDATE queue_levels SET queued = queued - 1 WHERE ns = OLD.ns AND queue = OLD.queue AND priority = OLD.priority;
END;
--> statement-breakpoint
CREATE TRIGGER `invocations_levels_delete` AFTER DELETE ON `invocations`
WHEN OLD.state = 'queued'
BEGIN
  UPDATE queue_levels SET queued = queued - 1 WHERE ns = OLD.ns AND queue = OLD.queue AND priority = OLD.priority;
END;
