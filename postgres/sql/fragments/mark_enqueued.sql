{{/*
mark_enqueued gives newly enqueued jobs their ready marks. It expects a
CTE
    inserted (the readpast_jobs rows just inserted)
and defines marked.

Only pending jobs get marks: a flow's blocked jobs get theirs when they
are released (migrations/0016_flows.sql). Per group and queue, the first due job of the batch gets a mark, and so
does every job not yet due. The batch's later due jobs of a group need
none: they commit with the first one, so whoever decides on the group
through its mark sees them, and marks the next of them while a slot is
free. Marks have no unique key: inserting one waits on nobody.
*/}}{{define "mark_enqueued"}}
marked AS (
    INSERT INTO readpast_group_ready (queue, priority, run_at, job_id, group_key)
    SELECT queue, priority, readpast_turn(group_key, run_at), id, group_key
    FROM (SELECT queue, priority, run_at, id, group_key,
                 row_number() OVER (PARTITION BY group_key, queue, run_at <= now()
                                    ORDER BY priority, run_at, id) AS rn
          FROM inserted WHERE group_key IS NOT NULL AND state = 'pending') i
    WHERE rn = 1 OR run_at > now()
){{end}}
