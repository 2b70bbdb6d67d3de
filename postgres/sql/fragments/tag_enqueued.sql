{{/*
tag_enqueued writes the tag rows of newly enqueued jobs. It expects a CTE
    inserted (the readpast_jobs rows just inserted)
and defines tagged.

One row per (tag, job) in readpast_job_tags, the index of listings and
bulk actions by tag. The job ids are fresh, so the primary key check of
the insert never waits on another transaction.
*/}}{{define "tag_enqueued"}}
tagged AS (
    INSERT INTO readpast_job_tags (tag, job_id)
    SELECT t.tag, i.id
    FROM inserted i CROSS JOIN LATERAL unnest(i.tags) AS t(tag)
    WHERE i.tags IS NOT NULL
    ORDER BY 1, 2
){{end}}
