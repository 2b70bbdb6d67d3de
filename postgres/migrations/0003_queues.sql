-- Schema version 3: queues that can be paused.
--
-- A row per queue that has been paused (paused_at set) or resumed
-- (paused_at NULL). Claims leave out the queues paused when their
-- statement starts; enqueues, and the jobs already running, are not
-- affected. Only PauseQueue and ResumeQueue write here; claims read a row
-- per queue they take from, without locking it.
CREATE TABLE readpast_queues (
    name      text PRIMARY KEY,
    paused_at timestamptz
);
