-- A job's worker as a number (invocations.worker), its name kept once a namespace in `workers`:
-- a worker id is often a host name and a pid, 26-46 bytes on every job it ran (bench/README.md,
-- "Rows that grow after they are written").
--
-- No row is rewritten: a D1 statement runs 30 s at most, and a full shard holds tens of millions
-- of jobs, so a backfill of every row could not finish there. A row claimed before this keeps its
-- worker's name in `worker_id` until its queue's retention removes it, and the Worker of before
-- this, still serving while a deploy goes out, goes on writing names there: reads take the name
-- from either, and the fencing guard accepts a row's holder by number or, on a row without one,
-- by that name (src/core/sql/workers.ts, fence.ts).
--
-- `workers` is keyed by (ns, n) WITHOUT ROWID, so its (ns, name) index holds the number too: a
-- name's number (a claim, the guard) and a number's name (a read) are one search of one tree.
CREATE TABLE `workers` (
	`ns` text NOT NULL,
	`n` integer NOT NULL,
	`name` text NOT NULL,
	PRIMARY KEY(`ns`, `n`)
) WITHOUT ROWID;
--> statement-breakpoint
CREATE UNIQUE INDEX `workers_ns_name` ON `workers` (`ns`,`name`);
--> statement-breakpoint
ALTER TABLE `invocations` ADD `worker` integer;
