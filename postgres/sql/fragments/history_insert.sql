{{/*
history_insert is the head of the statement that moves jobs to the
history: the table and its columns, in the order every such SELECT gives
them (complete.sql, cancel.sql, bulk_cancel.sql, fail_for_good).
*/}}{{define "history_insert"}}INSERT INTO readpast_jobs_history
        (id, queue, kind, payload, priority, run_at, state, attempt, max_attempts, token,
         worker, group_key, created_at, started_at, finished_at, errors, result, unique_key, unique_until,
         tags, snoozes, more_keys){{end}}
