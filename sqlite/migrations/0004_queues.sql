-- readpast schema version 4 for SQLite: queues that can be paused.
--
-- A row per queue that has been paused (paused_at set, unix microseconds)
-- or resumed (paused_at NULL). Claims leave out the paused queues; enqueues
-- and running jobs are not affected.
CREATE TABLE readpast_queues (
    name      TEXT PRIMARY KEY,
    paused_at INTEGER
) WITHOUT ROWID;
