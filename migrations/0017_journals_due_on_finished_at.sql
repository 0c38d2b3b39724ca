-- journals_due's triggers (0016) fire on the updates that set finished_at, not on every update of
-- state: every statement that finishes a job, or takes one back from finished, sets finished_at
-- (ack, nack, expire, the TTL sweep, cancel, retry), while a claim, the hottest update, sets none.
-- A trigger costs each row it is checked on even when its WHEN is false: two fewer on every
-- claimed row (bench/README.md, "journals_due's triggers on finished_at").
DROP TRIGGER `journals_due_finish`;
--> statement-breakpoint
DROP TRIGGER `journals_due_reopen`;
--> statement-breakpoint
CREATE TRIGGER `journals_due_finish` AFTER UPDATE OF finished_at ON `invocations`
WHEN NEW.state IN ('succeeded', 'failed', 'cancelled') AND OLD.state NOT IN ('succeeded', 'failed', 'cancelled')
  AND EXISTS (SELECT 1 FROM queues WHERE ns = NEW.ns AND queue = NEW.queue AND journal_retention_ms IS NOT NULL)
  AND EXISTS (SELECT 1 FROM frames WHERE inv = NEW.rid)
BEGIN
  INSERT OR REPLACE INTO journals_due (inv, ns, queue, finished_at) VALUES (NEW.rid, NEW.ns, NEW.queue, COALESCE(NEW.finished_at, NEW.updated_at));
END;
--> statement-breakpoint
CREATE TRIGGER `journals_due_reopen` AFTER UPDATE OF finished_at ON `invocations`
WHEN OLD.state IN ('succeeded', 'failed', 'cancelled') AND NEW.state NOT IN ('succeeded', 'failed', 'cancelled')
BEGIN
  DELETE FROM journals_due WHERE inv = OLD.rid;
END;
