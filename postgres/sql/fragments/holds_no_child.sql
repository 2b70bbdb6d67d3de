{{/*
holds_no_child is true when the finished job whose id is the argument (a
column reference) holds back no child (docs/design/workflows.md): no
unresolved edge of it ('held', or 'open' while the resolver has yet to
reach it) leads to a job still blocked, and it has no edges left to the
resolver (readpast_flow_backlog). Such a job is kept by prunes and
deletes, so that its retry, or the resolver, can still release the
child. Two primary-key probes for a job no edge names.
*/}}{{define "holds_no_child"}}(NOT EXISTS (
    SELECT 1 FROM readpast_edges d JOIN readpast_jobs c ON c.id = d.child_id
    WHERE d.parent_id = {{.}} AND d.state <> 'done' AND c.state = 'blocked'
) AND NOT EXISTS (
    SELECT 1 FROM readpast_flow_backlog b WHERE b.parent_id = {{.}}
)){{end}}
