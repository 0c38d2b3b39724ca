CREATE TABLE `tokens` (
	`id` text PRIMARY KEY NOT NULL,
	`ns` text NOT NULL,
	`role` text NOT NULL,
	`pools` text,
	`name` text,
	`digest` text NOT NULL,
	`created_at` integer NOT NULL,
	`revoked_at` integer
);
