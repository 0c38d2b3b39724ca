CREATE TABLE `journals_due` (
	`inv` integer PRIMARY KEY NOT NULL,
	`ns` text NOT NULL,
	`queue` text NOT NULL,
	`finished_at` integer NOT NULL
);
--> statement-breakpoint
CREATE INDEX `journals_due_at` ON `journals_due` (`ns`,`queue`,`finished_at`);--> statement-breakpoint
ALTER TABLE `queues` ADD `journal_retention_ms` integer;