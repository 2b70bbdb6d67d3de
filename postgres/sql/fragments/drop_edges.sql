{{/*
drop_edges deletes the edges of history rows a statement deleted. It
expects a CTE
    gone (id bigint)
and defines dropped_children and dropped_parents. A job deleted from
history holds back no child (holds_no_child kept it otherwise), so its
edges as parent are resolved; its edges as child are of no more use.
*/}}{{define "drop_edges"}}
dropped_children AS (
    DELETE FROM readpast_edges WHERE parent_id = ANY (ARRAY(SELECT id FROM gone))
),
dropped_parents AS (
    DELETE FROM readpast_edges WHERE child_id = ANY (ARRAY(SELECT id FROM gone))
){{end}}
