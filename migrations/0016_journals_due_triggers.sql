-- journals_due (schema.ts): a finished job with frames, on a queue that keeps frames for less than
-- its jobs (journal_retention_ms), is noted as it finishes; the note goes when the job is back to
-- waiting (a retry by hand) or deleted, and the retention pass removes it with the frames.
CREATE TRIGGER `journals_due_finish` AFTER UPDATE OF state ON `invocations`
WHEN NEW.state IN ('succeeded', 'failed', 'cancelled') AND OLD.state NOT IN ('succeeded', 'failed', 'cancelled')
  AND EXISTS (SELECT 1 FROM queues WHERE ns = NEW.ns AND queue = NEW.queue AND journal_retention_ms IS NOT NULL)
  AND EXISTS (SELECT 1 FROM frames WHERE inv = NEW.rid)
BEGIN
  INSERT OR REPLACE INTO journals_due (inv, ns, queue, finished_at) VALUES (NEW.rid, NEW.ns, NEW.queue, COALESCE(NEW.finished_at, NEW.updated_at));
END;
--> statement-breakpoint
CREATE TRIGGER `journals_due_reopen` AFTER UPDATE OF state ON `invocations`
WHEN OLD.state IN ('succeeded', 'failed', 'cancelled') AND NEW.state NOT IN ('succeeded', 'failed', 'cancelled')
BEGIN
  DELETE FROM journals_due WHERE inv = OLD.rid;
END;
--> statement-breakpoint
CREATE TRIGGER `journals_due_delete` AFTER DELETE ON `invocations`
WHEN OLD.state IN ('succeeded', 'failed', 'cancelled')
BEGIN
  DELETE FROM journals_due WHERE inv = OLD.rid;
END;
