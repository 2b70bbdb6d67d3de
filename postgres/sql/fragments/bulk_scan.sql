{{/*
bulk_scan is the walk of a bulk action over the table named by the
template's argument (readpast_jobs or readpast_jobs_history), and
defines scan (id bigint): the next ids to act on.

Parameters: $1 queue, $2 kind, $3 state, $4 tag, $5 group ('' = any);
$6 the id the walk is past; $7 the batch size; $8 an array of ids to act
on instead of walking (the ids an earlier batch found locked, or the one
id of Delete), or NULL. Without a tag, the walk is the next $7 matching
rows of the table past $6, by primary key. With a tag, it is the next $7
rows of that tag in readpast_job_tags past $6 (its primary key), whatever
table the jobs are in; the statement re-checks the other filters on the
job rows it locks. The store runs it with custom plans (the parameters
known), so only one arm is planned. Reads only; locks nothing.
*/}}{{define "bulk_scan"}}
scan AS (
    (SELECT id FROM {{.}}
     WHERE $8::bigint[] IS NULL AND $4 = '' AND id > $6
       AND ($1 = '' OR queue = $1) AND ($2 = '' OR kind = $2) AND ($3 = '' OR state = $3)
       AND ($5 = '' OR group_key = $5)
     ORDER BY id
     LIMIT $7)
    UNION ALL
    (SELECT job_id FROM readpast_job_tags
     WHERE $8::bigint[] IS NULL AND $4 <> '' AND tag = $4 AND job_id > $6
     ORDER BY job_id
     LIMIT $7)
    UNION ALL
    SELECT unnest($8::bigint[])
){{end}}
