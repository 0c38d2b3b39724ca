CREATE TABLE `frames` (
	`inv` integer NOT NULL,
	`seq` integer NOT NULL,
	`kind` integer NOT NULL,
	`body` blob NOT NULL,
	`meta` text,
	`attempt` integer NOT NULL,
	`final` integer DEFAULT 0 NOT NULL,
	`created_at` integer NOT NULL,
	PRIMARY KEY(`inv`, `seq`)
);
--> statement-breakpoint
CREATE TABLE `invocations` (
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
	CONSTRAINT "invocations_state" CHECK(state IN ('queued', 'running', 'succeeded', 'failed', 'cancelled'))
);
--> statement-breakpoint
CREATE UNIQUE INDEX `invocations_ns_id` ON `invocations` (`ns`,`id`);--> statement-breakpoint
CREATE UNIQUE INDEX `invocations_ns_queue_key` ON `invocations` (`ns`,`queue`,`key`) WHERE key IS NOT NULL;--> statement-breakpoint
CREATE INDEX `invocations_queued` ON `invocations` (`ns`,`queue`,priority DESC,`rid`) WHERE state = 'queued';--> statement-breakpoint
CREATE INDEX `invocations_running` ON `invocations` (`ns`,`queue`,`lease_until`) WHERE state = 'running';--> statement-breakpoint
CREATE TABLE `queue_levels` (
	`ns` text NOT NULL,
	`queue` text NOT NULL,
	`priority` real NOT NULL,
	`queued` integer NOT NULL,
	PRIMARY KEY(`ns`, `queue`, `priority`)
);
--> statement-breakpoint
CREATE TABLE `queues` (
	`ns` text NOT NULL,
	`queue` text NOT NULL,
	`lease_ms` integer,
	`max_attempts` integer,
	`updated_at` integer NOT NULL,
	PRIMARY KEY(`ns`, `queue`)
);
