-- Custom SQL migration file, put your code below! --
-- Before the plane had shards every namespace lived in this database (the home database, DB):
-- the directory says so for each one that has rows here. On a new shard this inserts nothing.
INSERT OR IGNORE INTO namespaces (ns, shard, state, epoch, placed_at)
SELECT ns, 'DB', 'active', 0, 0 FROM (
  SELECT ns FROM invocations UNION SELECT ns FROM queues UNION SELECT ns FROM schedules UNION SELECT ns FROM tokens
);
