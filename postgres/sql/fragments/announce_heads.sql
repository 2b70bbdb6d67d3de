{{/*
announce_heads marks the next claimable jobs of groups whose row this
statement holds. It expects a CTE
    freed (group_key text, free integer)
naming those groups and their free slots, and defines announced.

For each group with a free slot: among its first free (at most 64) due
pending jobs across all queues, the first one in each queue gets a ready
mark, so a claimer of that queue finds the group. Jobs that became
pending in this same statement are invisible to its snapshot; the
statement marks those itself.
*/}}{{define "announce_heads"}}
announced AS (
    INSERT INTO readpast_group_ready (queue, priority, run_at, job_id, group_key)
    SELECT DISTINCT ON (f.group_key, h.queue) h.queue, h.priority, h.run_at, h.id, f.group_key
    FROM freed f
    CROSS JOIN LATERAL (
        SELECT j.id, j.queue, j.priority, j.run_at
        FROM readpast_jobs j
        WHERE j.group_key = f.group_key AND j.state = 'pending' AND j.run_at <= now()
        ORDER BY j.priority, j.run_at, j.id
        LIMIT least(greatest(f.free, 0), 64)
    ) h
    ORDER BY f.group_key, h.queue, h.priority, h.run_at, h.id
){{end}}
