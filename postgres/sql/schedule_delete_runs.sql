-- Delete the runs of schedule $1, after sql/schedule_delete.sql deleted
-- its row in the same transaction: every fire of it has committed or will
-- fire nothing.
DELETE FROM readpast_schedule_runs WHERE schedule = $1;
