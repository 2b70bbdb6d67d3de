// Package storetest is the conformance suite every readpast.Store runs:
// the same semantics on every store, or a documented difference.
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, storetest.Harness{New: newTestStore})
//	}
package storetest

import (
	"context"
	"database/sql"
	"encoding/json"
	"testing"
	"time"

	"github.com/readpast/readpast"
)

// Harness tells the suite how to make stores and how hard to push them.
type Harness struct {
	// New returns a fresh, migrated, empty store; the suite closes it.
	New func(t *testing.T) readpast.Store
	// StressJobs is how many jobs the concurrency tests enqueue.
	// Defaults to 5000.
	StressJobs int
	// Claimers is how many goroutines claim concurrently in the
	// concurrency tests. Defaults to 32.
	Claimers int
	// Groups reads every concurrency group that has a row or running
	// jobs, in one snapshot. Required: the group stress test checks the
	// store's counters and limits against the jobs actually running.
	Groups func(ctx context.Context, s readpast.Store) ([]GroupState, error)
	// Deadlocks, if set, returns how many deadlocks the database has
	// detected so far; the group stress test wants none.
	Deadlocks func(ctx context.Context, s readpast.Store) (int64, error)
	// StressDuration is how long the group stress test runs. Defaults to
	// 5 seconds.
	StressDuration time.Duration
	// BeginSQLTx begins a database/sql transaction that the store's
	// readpast.SQLTxStore methods can join (closed by the test's end).
	// Required: every store implements SQLTxStore.
	BeginSQLTx func(t *testing.T, s readpast.Store) *sql.Tx
	// TagRows counts the store's tag index rows (readpast_job_tags), to
	// check that deleting a job deletes them. Required.
	TagRows func(ctx context.Context, s readpast.Store) (int64, error)
}

func (h Harness) withDefaults() Harness {
	if h.StressJobs == 0 {
		h.StressJobs = 5000
	}
	if h.Claimers == 0 {
		h.Claimers = 32
	}
	if h.StressDuration == 0 {
		h.StressDuration = 5 * time.Second
	}
	return h
}

// Run runs the whole suite, one subtest per behaviour.
func Run(t *testing.T, h Harness) {
	if h.New == nil || h.Groups == nil || h.BeginSQLTx == nil || h.TagRows == nil {
		t.Fatal("storetest.Harness: New, Groups, BeginSQLTx and TagRows are required")
	}
	h = h.withDefaults()
	tests := []struct {
		name string
		fn   func(*testing.T, Harness)
	}{
		{"EnqueueBatch", testEnqueueBatch},
		{"EnqueueInvalidChangesNothing", testEnqueueInvalid},
		{"EnqueueLargeBatch", testEnqueueLargeBatch},
		{"ClaimOrder", testClaimOrder},
		{"RunAtNotClaimedEarly", testRunAtNotEarly},
		{"ClaimQueues", testClaimQueues},
		{"Fencing", testFencing},
		{"CompleteIdempotent", testCompleteIdempotent},
		{"InTheCallersTransaction", testSQLTx},
		{"BatchRepeatsAndBadEntries", testBatchRepeats},
		{"LeaseExpiry", testLeaseExpiry},
		{"LeaseExpiryUsesUpAttempts", testLeaseExpiryMaxAttempts},
		{"ExtendKeepsLease", testExtend},
		{"FailRetriesThenFails", testFailRetries},
		{"FailDiscard", testFailDiscard},
		{"Release", testRelease},
		{"CancelAndRetry", testCancelRetry},
		{"CancelPending", testCancelPending},
		{"CancelClaimed", testCancelClaimed},
		{"TokenSpellings", testTokenSpellings},
		{"RunNow", testRunNow},
		{"RunNowGroup", testRunNowGroup},
		{"ScheduleRunNow", testScheduleRunNow},
		{"StatsCountEveryChange", testStatsCountEveryChange},
		{"ListAndStats", testListStats},
		{"PauseAndResumeQueues", testPause},
		{"PauseHoldsAGroupsLaterJobs", testPauseGroupStream},
		{"Inspect", testInspect},
		{"InspectQueue", testInspectQueue},
		{"Retrying", testRetrying},
		{"Prune", testPrune},
		{"GroupMutualExclusion", testGroupExclusion},
		{"GroupLimit", testGroupLimit},
		{"GroupLimitChangesWhileRunning", testGroupLimitChanges},
		{"GroupHeadArrivesWhileRunning", testGroupNewHead},
		{"GroupBacklogHidesNothing", testGroupBacklog},
		{"GroupFutureHeadBlocksNothing", testGroupFutureHead},
		{"GroupIsOneStreamAcrossQueues", testGroupAcrossQueues},
		{"GroupFreedByEveryExit", testGroupFreed},
		{"BusyGroupBlocksNothing", testBusyGroup},
		{"ConcurrentClaimsExactlyOnce", testConcurrentExactlyOnce},
		{"ConcurrentGroupsNoOverlap", testConcurrentGroups},
		{"GroupLimitsUnderStress", testGroupStress},
		{"FlowsUnderStress", testFlowStress},
		{"UniqueDuplicate", testUniqueDuplicate},
		{"UniqueBatchSettlesEachEntry", testUniqueBatch},
		{"UniqueScopes", testUniqueScopes},
		{"UniqueConcurrentEnqueuers", testUniqueConcurrent},
		{"ScheduleCRUD", testScheduleCRUD},
		{"ScheduleFireOnce", testScheduleFireOnce},
		{"SchedulersExactlyOncePerTick", testSchedulersExactlyOncePerTick},
		{"ScheduleCatchUp", testScheduleCatchUp},
		{"SchedulerRuns", testSchedulerRuns},
		{"SchedulersAcrossDST", testSchedulersAcrossDST},
		{"SchedulePutNeverGoesBack", testSchedulePutNeverGoesBack},
		{"ScheduleResumeNeverGoesBack", testScheduleResumeNeverGoesBack},
		{"ScheduleFiredTickMovesOn", testScheduleFiredTickMovesOn},
		{"ScheduleTickFiresOnceAfterTrim", testScheduleTickFiresOnceAfterTrim},
		{"ScheduleDeleteLeavesNothing", testScheduleDeleteLeavesNothing},
		{"Tags", testTags},
		{"TagsInvalidChangeNothing", testTagsInvalid},
		{"SnoozeReturnsToPendingUncounted", testSnooze},
		{"SnoozeFreesGroupSlot", testSnoozeGroup},
		{"SnoozeCountsEachSnooze", testSnoozeCount},
		{"BulkCancel", testBulkCancel},
		{"BulkCancelManyBatches", testBulkCancelMany},
		{"BulkRetry", testBulkRetry},
		{"BulkDeleteAndDelete", testBulkDelete},
		{"BulkFilterRequired", testBulkFilterRequired},
		{"LimitsCRUD", testLimitsCRUD},
		{"LimitTemplates", testLimitTemplates},
		{"LimitWithoutBound", testLimitWithoutBound},
		{"RateLimit", testRateLimit},
		{"RateRefills", testRateRefills},
		{"RetrySpendsAToken", testRetrySpendsAToken},
		{"TakeTokens", testTakeTokens},
		{"RateLimitsUnderStress", testRateLimitsUnderStress},
		{"KeysTakeTurns", testKeysTakeTurns},
		{"KeysRoundTrip", testKeysRoundTrip},
		{"KeysFollowTheJob", testKeysFollowTheJob},
		{"KeysInvalidChangeNothing", testKeysInvalid},
		{"KeysEveryKeyLimits", testKeysEveryKeyLimits},
		{"KeysWaitersWakeOnEveryExit", testKeysWaitersWake},
		{"KeysStaleTokenFreesNothing", testKeysStaleTokenFreesNothing},
		{"KeysLimitRaisedWakesWaiters", testKeysLimitRaisedWakes},
		{"KeysRateOnALaterKey", testKeysRateOnALaterKey},
		{"KeysSharedBudgetInOneClaim", testKeysSharedBudgetInOneClaim},
		{"KeysFirstKeyNotHeldBack", testKeysFirstKeyNotHeldBack},
		{"KeysFirstKeyNotHeldBackInClaimsOfOne", testKeysFirstKeyNotHeldBackInClaimsOfOne},
		{"KeysHeldFirstJobHidesNothing", testKeysHeldFirstJobHidesNothing},
		{"KeysTokenHeldJobDelaysNothing", testKeysTokenHeldJobDelaysNothing},
		{"KeysConcurrentClaimsNeverOverrun", testKeysConcurrentClaims},
		{"TurnsKept", testTurnsKept},
		{"WeightedTurns", testWeightedTurns},
		{"WeightsAcrossClaims", testWeightsAcrossClaims},
		{"RoundsCountTakenHeads", testRoundsCountTakenHeads},
		{"FlowRunsInOrder", testFlowRunsInOrder},
		{"FlowFanIn", testFlowFanIn},
		{"FlowPolicies", testFlowPolicies},
		{"FlowChainCancels", testFlowChainCancels},
		{"FlowHoldThenRetry", testFlowHoldThenRetry},
		{"FlowStaleParent", testFlowStaleParent},
		{"FlowExistingParents", testFlowExistingParents},
		{"FlowInvalid", testFlowInvalid},
		{"FlowBlockedJobs", testFlowBlockedJobs},
		{"FlowGroupedChild", testFlowGroupedChild},
		{"FlowWakes", testFlowWakes},
		{"FlowPruneKeepsParentsOfLiveChildren", testFlowPruneKeepsParentsOfLiveChildren},
		{"FlowLeavesTogether", testFlowLeavesTogether},
		{"FlowRetentionPerState", testFlowRetentionPerState},
		{"FlowEarlierParentGoesAlone", testFlowEarlierParentGoesAlone},
		{"BatchLeavesTogether", testBatchLeavesTogether},
		{"FlowPruneInSteps", testFlowPruneInSteps},
		{"BatchRunsAfterMembers", testBatchRunsAfterMembers},
		{"BatchSealedFirst", testBatchSealedFirst},
		{"BatchOnSuccess", testBatchOnSuccess},
		{"BatchRefusals", testBatchRefusals},
		{"BatchJoinsRaceTheSeal", testBatchJoinsRaceTheSeal},
		{"FlowRelatives", testFlowRelatives},
		{"FlowGraph", testFlowGraph},
		{"FlowParentResults", testFlowParentResults},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, h) })
	}
}

// newStore makes a store closed at the end of the test.
func newStore(t *testing.T, h Harness) readpast.Store {
	t.Helper()
	s := h.New(t)
	t.Cleanup(func() { s.Close() })
	return s
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// result carries a call's two results to must.
type result[T any] struct {
	v   T
	err error
}

func ok[T any](v T, err error) result[T] { return result[T]{v, err} }

// must fails the test on an error.
func (r result[T]) must(t *testing.T) T {
	t.Helper()
	if r.err != nil {
		t.Fatal(r.err)
	}
	return r.v
}

func enqueue(t *testing.T, s readpast.Store, ps ...readpast.EnqueueParams) []*readpast.Job {
	t.Helper()
	return ok(s.Enqueue(ctxT(t), ps)).must(t)
}

func claim(t *testing.T, s readpast.Store, limit int, lease time.Duration, queues ...string) []*readpast.Job {
	t.Helper()
	return ok(s.Claim(ctxT(t), readpast.ClaimParams{Queues: queues, Worker: "w-" + t.Name(), Limit: limit, Lease: lease})).must(t)
}

func get(t *testing.T, s readpast.Store, id int64) *readpast.Job {
	t.Helper()
	return ok(s.Get(ctxT(t), id)).must(t)
}

func ids(jobs []*readpast.Job) []int64 {
	out := make([]int64, len(jobs))
	for i, j := range jobs {
		out[i] = j.ID
	}
	return out
}

func wantState(t *testing.T, s readpast.Store, id int64, want readpast.JobState) *readpast.Job {
	t.Helper()
	j := get(t, s, id)
	if j.State != want {
		t.Fatalf("job %d: state %s, want %s", id, j.State, want)
	}
	return j
}

func completeOne(ctx context.Context, s readpast.Store, j *readpast.Job, result string) error {
	var r json.RawMessage
	if result != "" {
		r = json.RawMessage(result)
	}
	errs, err := s.Complete(ctx, []readpast.Completion{{ID: j.ID, Token: j.Token, Result: r}})
	if err != nil {
		return err
	}
	return errs[0]
}

func failOne(ctx context.Context, s readpast.Store, f readpast.Failure) error {
	errs, err := s.Fail(ctx, []readpast.Failure{f})
	if err != nil {
		return err
	}
	return errs[0]
}
