package postgres

import (
	"embed"
	"fmt"
	"strings"
	"text/template"
)

// sqlFiles holds the statements, one file each under sql/, and the
// fragments under sql/fragments/ that several statements share
// ({{template "free_slots"}}). Each file's header says what the statement
// does, what it locks and in which order. The texts are rendered once, at
// package initialization, from these constant files only: no statement
// text ever depends on input.
//
//go:embed sql/*.sql sql/fragments/*.sql sql/routines/*.sql
var sqlFiles embed.FS

// The statements.
var (
	enqueueSQL = mustStatement("enqueue")
	claimSQL   = mustStatement("claim")
	// claimQueuesSQL takes the pause keys of a claim's queues; the claim
	// routine runs it first, in a statement of its own.
	claimQueuesSQL    = mustStatement("claim_queues")
	claimUngroupedSQL = mustStatement("claim_ungrouped")
	// claimUngroupedFromSQL is claim_ungrouped starting after a position
	// in claim order (claimfrom.go).
	claimUngroupedFromSQL = mustStatementWith("claim_ungrouped", "from")
	completeSQL           = mustStatement("complete")
	failSQL               = mustStatement("fail")
	rescueSQL             = mustStatement("rescue")
	// rescueFromSQL is rescue reading the lease index after a position
	// (claimfrom.go).
	rescueFromSQL      = mustStatementWith("rescue", "from")
	extendSQL          = mustStatement("extend")
	releaseSQL         = mustStatement("release")
	cancelSQL          = mustStatement("cancel")
	retrySQL           = mustStatement("retry")
	getSQL             = mustStatement("get")
	listSQL            = mustStatement("list")
	listTagSQL         = mustStatement("list_tag")
	snoozeSQL          = mustStatement("snooze")
	bulkCancelStmt     = mustBulkStatement("bulk_cancel")
	bulkRetryStmt      = mustBulkStatement("bulk_retry")
	bulkDeleteStmt     = mustBulkStatement("bulk_delete")
	statsSQL           = mustStatement("stats")
	pruneSQL           = mustStatement("prune")
	pruneGroupsSQL     = mustStatement("prune_groups")
	tokenStatesSQL     = mustStatement("token_states")
	endClaimSessionSQL = mustStatement("end_claim_session")
	pauseQueueSQL      = mustStatement("pause_queue")
	resumeQueueSQL     = mustStatement("resume_queue")
	pausedQueuesSQL    = mustStatement("paused_queues")
	deadRowsSQL        = mustStatement("dead_rows")
	foldCountsSQL      = mustStatement("fold_counts")
	foldFreedSQL       = mustStatementWith("fold_freed", "")
	foldFreedKeysSQL   = mustStatementWith("fold_freed", "keys")

	enqueueUniqueSQL = mustStatement("enqueue_unique")
	enqueueFlowSQL   = mustStatement("enqueue_flow")
	flowParentsSQL   = mustStatement("flow_parents")
	flowMarkSQL      = mustStatement("flow_mark_parents")
	flowEdgesSQL     = mustStatement("flow_edges")
	// flowParentStateSQL reads why a job cannot be a flow's parent.
	flowParentStateSQL = mustStatement("flow_parent_state")
	// flowHeldChildrenSQL counts the blocked jobs a finished job holds.
	flowHeldChildrenSQL = mustStatement("flow_held_children")
	resolveFlowsSQL     = mustStatement("resolve_flows")
	flowDepthSQL        = mustStatement("flow_depth")
	uniqueStaleSQL      = mustStatement("unique_stale")
	uniqueHolderSQL     = mustStatement("unique_holder")

	schedulePutSQL        = mustStatement("schedule_put")
	scheduleGetSQL        = mustStatement("schedule_get")
	scheduleListSQL       = mustStatement("schedule_list")
	scheduleDueSQL        = mustStatement("schedule_due")
	schedulePauseSQL      = mustStatement("schedule_pause")
	scheduleResumeSQL     = mustStatement("schedule_resume")
	scheduleDeleteSQL     = mustStatement("schedule_delete")
	scheduleDeleteRunsSQL = mustStatement("schedule_delete_runs")
	scheduleRunsSQL       = mustStatement("schedule_runs")
	scheduleFireSQL       = mustStatement("schedule_fire")
)

// vacuumSQL is the VACUUM of each table Store.Tidy may vacuum, by name:
// the statement is picked from this table, never assembled. SKIP_LOCKED:
// when another VACUUM holds the table, skip it instead of waiting.
var vacuumSQL = map[string]string{
	"readpast_jobs":         "VACUUM (SKIP_LOCKED) readpast_jobs",
	"readpast_group_ready":  "VACUUM (SKIP_LOCKED) readpast_group_ready",
	"readpast_groups":       "VACUUM (SKIP_LOCKED) readpast_groups",
	"readpast_count_deltas": "VACUUM (SKIP_LOCKED) readpast_count_deltas",
	"readpast_unique_keys":  "VACUUM (SKIP_LOCKED) readpast_unique_keys",
	"readpast_key_freed":    "VACUUM (SKIP_LOCKED) readpast_key_freed",
}

// fragments are parsed once and cloned for every statement.
var fragments = template.Must(template.New("fragments").ParseFS(sqlFiles, "sql/fragments/*.sql"))

// mustStatement renders sql/name.sql with the shared fragments. It panics
// on an error: the files are compiled in, so an error is a bug that every
// test run shows at once.
func mustStatement(name string) string { return mustStatementWith(name, nil) }

// mustStatementWith is mustStatement with data for the template (a
// constant of this package, never input).
func mustStatementWith(name string, data any) string {
	s, err := renderStatement(name, data)
	if err != nil {
		panic(err)
	}
	return s
}

func renderStatement(name string, data any) (string, error) {
	src, err := sqlFiles.ReadFile("sql/" + name + ".sql")
	if err != nil {
		return "", err
	}
	t, err := template.Must(fragments.Clone()).New(name).Option("missingkey=error").Parse(string(src))
	if err != nil {
		return "", fmt.Errorf("postgres: statement %s: %w", name, err)
	}
	var b strings.Builder
	if err := t.Execute(&b, data); err != nil {
		return "", fmt.Errorf("postgres: statement %s: %w", name, err)
	}
	return b.String(), nil
}
