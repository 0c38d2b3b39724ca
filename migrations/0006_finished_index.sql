DROP INDEX `invocations_failed`;--> statement-breakpoint
CREATE INDEX `invocations_finished` ON `invocations` (`ns`,`queue`,`state`,`rid`) WHERE state IN ('succeeded', 'failed', 'cancelled');