CREATE TABLE `local_feed` (
	`seq` integer PRIMARY KEY AUTOINCREMENT NOT NULL,
	`ns` text NOT NULL,
	`queue` text NOT NULL,
	`record` text NOT NULL
);
--> statement-breakpoint
CREATE INDEX `local_feed_ns` ON `local_feed` (`ns`,`seq`);--> statement-breakpoint
CREATE TABLE `local_feed_readers` (
	`reader` text PRIMARY KEY NOT NULL,
	`ns` text NOT NULL,
	`until` integer NOT NULL
);
