-- A job's worker as a number (invocations.worker), its name kept once a namespace in `workers`:
-- a worker id is often a host name and a pid, 30-40 bytes on every job it ran (bench/README.md,
-- "Row layouts against the 200-byte goal": 293 -> 270 bytes a finished job with a 26-byte id).
-- The rows there are numbered as the workers first appear, and the column is replaced in place
-- (ADD, fill, DROP: no copy of the table, its indexes and triggers kept). `workers` is keyed by
-- (ns, n) WITHOUT ROWID, so its (ns, name) index holds the number too: a name's number (a claim,
-- the fencing guard) and a number's name (a read) are each one search of one tree.
CREATE TABLE `workers` (
	`ns` text NOT NULL,
	`n` integer NOT NULL,
	`name` text NOT NULL,
	PRIMARY KEY(`ns`, `n`)
) WITHOUT ROWID;
--> statement-breakpoint
CREATE UNIQUE INDEX `workers_ns_name` ON `workers` (`ns`,`name`);
--> statement-breakpoint
INSERT INTO `workers` (`ns`, `n`, `name`)
SELECT `ns`, row_number() OVER (PARTITION BY `ns` ORDER BY `first`), `worker_id`
  FROM (SELECT `ns`, `worker_id`, min(`rid`) AS `first` FROM `invocations` WHERE `worker_id` IS NOT NULL GROUP BY `ns`, `worker_id`);
--> statement-breakpoint
ALTER TABLE `invocations` ADD `worker` integer;
--> statement-breakpoint
UPDATE `invocations` SET `worker` = (SELECT `n` FROM `workers` w WHERE w.`ns` = `invocations`.`ns` AND w.`name` = `invocations`.`worker_id`)
 WHERE `worker_id` IS NOT NULL;
--> statement-breakpoint
ALTER TABLE `invocations` DROP COLUMN `worker_id`;
