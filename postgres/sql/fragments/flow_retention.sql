{{/*
Fragments of flow retention (prune_flow_seeds.sql, prune_flow.sql), whose
parameters $3, $4 and $5 are the cutoffs of succeeded, failed and
cancelled jobs (NULL keeps that state's jobs).

ripe_job is true when the job whose id is the argument is in history,
finished before its state's cutoff, and past its unique key's period.
*/}}{{define "ripe_job"}}EXISTS (
    SELECT 1 FROM readpast_jobs_history rh
    WHERE rh.id = {{.}}
      AND rh.finished_at < CASE rh.state WHEN 'succeeded' THEN $3::timestamptz
                                         WHEN 'failed' THEN $4::timestamptz
                                         WHEN 'cancelled' THEN $5::timestamptz END
      AND (rh.unique_until IS NULL OR rh.unique_until <= now())
){{end}}{{/*

joins_child is true when edge e (an alias) joins its parent's flow to its
child's: an edge one EnqueueFlow call stored between two of its jobs
(parent_ref set), or a batch member's edge into a finishing job (the
child has a seal edge, from its id negated).
*/}}{{define "joins_child"}}(e.parent_ref <> '' OR EXISTS (
    SELECT 1 FROM readpast_edges s WHERE s.parent_id = -e.child_id AND s.child_id = e.child_id
)){{end}}{{/*

joins_parent is joins_child for an edge e into the job whose id is the
argument, from a job (not a seal).
*/}}{{define "joins_parent"}}(e.parent_id > 0 AND (e.parent_ref <> '' OR EXISTS (
    SELECT 1 FROM readpast_edges s WHERE s.parent_id = -{{.}} AND s.child_id = {{.}}
))){{end}}
