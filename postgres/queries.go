package postgres

import _ "embed"

// The statements, one file each under sql/. Each file's header says what
// it does, what it locks and which states it touches.
var (
	//go:embed sql/enqueue.sql
	enqueueSQL string
	//go:embed sql/claim.sql
	claimSQL string
	//go:embed sql/complete.sql
	completeSQL string
	//go:embed sql/fail.sql
	failSQL string
	//go:embed sql/rescue.sql
	rescueSQL string
	//go:embed sql/extend.sql
	extendSQL string
	//go:embed sql/release.sql
	releaseSQL string
	//go:embed sql/cancel.sql
	cancelSQL string
	//go:embed sql/retry.sql
	retrySQL string
	//go:embed sql/get.sql
	getSQL string
	//go:embed sql/list.sql
	listSQL string
	//go:embed sql/stats.sql
	statsSQL string
	//go:embed sql/prune.sql
	pruneSQL string
	//go:embed sql/set_group_limit.sql
	setGroupLimitSQL string
	//go:embed sql/token_states.sql
	tokenStatesSQL string
)
