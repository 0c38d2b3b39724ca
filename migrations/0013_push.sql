ALTER TABLE `queues` ADD `push_url` text;--> statement-breakpoint
ALTER TABLE `queues` ADD `push_concurrency` integer;--> statement-breakpoint
ALTER TABLE `queues` ADD `push_timeout_ms` integer;--> statement-breakpoint
ALTER TABLE `queues` ADD `push_secret` text;--> statement-breakpoint
ALTER TABLE `queues` ADD `push_secret_old` text;--> statement-breakpoint
ALTER TABLE `queues` ADD `push_secret_old_until` integer;