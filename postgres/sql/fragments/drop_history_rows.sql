{{/*
drop_history_rows deletes what hangs off history rows a statement
deleted: their tags' index rows, the unique keys they still hold, and
their edges (drop_edges). It expects a CTE
    gone (id bigint, unique_key text, tags text[])
and defines dropped_tags, freed_keys, dropped_children and
dropped_parents.
*/}}{{define "drop_history_rows"}}
dropped_tags AS (
    DELETE FROM readpast_job_tags t
    USING (SELECT id, unnest(tags) AS tag FROM gone WHERE tags IS NOT NULL) g
    WHERE t.tag = g.tag AND t.job_id = g.id
),
freed_keys AS (
    DELETE FROM readpast_unique_keys k
    USING gone g
    WHERE g.unique_key IS NOT NULL AND k.unique_key = g.unique_key AND k.job_id = g.id
),
{{template "drop_edges"}}{{end}}
