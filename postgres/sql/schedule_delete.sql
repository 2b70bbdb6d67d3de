-- Delete schedule $1; sql/schedule_delete_runs.sql then deletes its runs
-- in the same transaction. The DELETE locks the schedule's row, so it
-- waits for a scheduler firing it to commit, and the runs are deleted by
-- a later statement, whose snapshot holds that fire's run. The jobs the
-- schedule made stay.
DELETE FROM readpast_schedules WHERE name = $1;
