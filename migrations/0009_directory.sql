CREATE TABLE `namespace_queues` (
	`ns` text NOT NULL,
	`queue` text NOT NULL,
	PRIMARY KEY(`ns`, `queue`)
);
--> statement-breakpoint
CREATE TABLE `namespaces` (
	`ns` text PRIMARY KEY NOT NULL,
	`shard` text NOT NULL,
	`state` text DEFAULT 'active' NOT NULL,
	`epoch` integer DEFAULT 0 NOT NULL,
	`placed_at` integer NOT NULL
);
