package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/readpast/readpast"
)

// ClaimTx exposes claimTx to the tests of package postgres_test.
var ClaimTx = claimTx

// ClaimSQL is the claim statement, for EXPLAIN in benchmarks.
var ClaimSQL = claimSQL

// TidyWait is how long Tidy waits before it vacuums table again.
func TidyWait(s *Store, table string) time.Duration {
	s.tidy.mu.Lock()
	defer s.tidy.mu.Unlock()
	return s.tidy.wait[table]
}

// FoldCountsSQL is the statement that folds count deltas, for tests that
// hold one open in a transaction.
var FoldCountsSQL = foldCountsSQL

// HotMode is the exec mode of s's hot-path statements.
func HotMode(s *Store) pgx.QueryExecMode { return s.hotMode }

// Listens reports whether s holds a LISTEN session for Subscribe.
func Listens(s *Store) bool { return !s.noListen }

// ListTagSQL is sql/list_tag.sql, for TestExplainListByTag.
var ListTagSQL = listTagSQL

// ClaimCall and CompleteCall are the statements Store.Claim and
// Store.Complete send: the calls of their routines (routines.go).
var (
	ClaimCall    = claimRoutine.call
	CompleteCall = completeRoutine.call
)

// RoutineNames are the functions this build's routines define.
func RoutineNames() []string {
	var names []string
	for _, r := range routines {
		names = append(names, r.name)
	}
	return names
}

// SetNotifyEvery sets how often at most s.Enqueue notifies (notifyEvery).
func SetNotifyEvery(s *Store, d time.Duration) { s.notify.every = d }

// OnEnqueueStatement makes s call f, with its number of jobs, before each
// statement its enqueuer runs (see enqueuer); f may block to hold the
// statement. Set it before the store is used.
func OnEnqueueStatement(s *Store, f func(jobs int)) {
	write := s.enq.write
	s.enq.write = func(ctx context.Context, cols *enqueueCols) ([]*readpast.Job, error) {
		f(cols.jobs())
		return write(ctx, cols)
	}
}

// OnEnqueueContext makes s call f with the context of each statement its
// enqueuer runs, after any hook set before. Set it before the store is
// used.
func OnEnqueueContext(s *Store, f func(ctx context.Context)) {
	write := s.enq.write
	s.enq.write = func(ctx context.Context, cols *enqueueCols) ([]*readpast.Job, error) {
		f(ctx)
		return write(ctx, cols)
	}
}

// EnqueueWaiting is how many Enqueue calls of s wait for a shared statement.
func EnqueueWaiting(s *Store) int {
	s.enq.mu.Lock()
	defer s.enq.mu.Unlock()
	return len(s.enq.waiting)
}

// EnqueueWriters is how many enqueue statements of a store run at once
// before calls queue up (enqueueWriters).
const EnqueueWriters = enqueueWriters

// OnVacuum makes s's Tidy call f after each vacuum, before it judges the
// vacuum's outcome. Set it before Tidy runs.
func OnVacuum(s *Store, f func(table string)) { s.tidy.vacuumed = f }

// SetClaimFullEvery sets how often s's claims start at the head of the
// claim order at the least, in place of fullInterval (claimfrom.go).
func SetClaimFullEvery(s *Store, d time.Duration) {
	s.claimFrom.mu.Lock()
	defer s.claimFrom.mu.Unlock()
	s.claimFrom.fullEvery = d
}

// OnAhead makes s call f as it begins to make the next claim of every
// queue a full one (claimFrom.ahead), after each write that may have made
// jobs pending ahead of a position. Set it before the store is used.
func OnAhead(s *Store, f func()) { s.claimFrom.onAhead = f }

// ClaimStartArgs are the claim routine's last arguments for a claim that
// the store starts at j's position (claimfrom.go).
func ClaimStartArgs(j *readpast.Job) []any {
	return claimStart{positioned: true, from: positionOf(j)}.args()
}

// ClaimFromSlack is how far before the last job claimed a positioned claim
// starts (claimfrom.go).
const ClaimFromSlack = claimFromSlack

// FullInterval is fullInterval (claimfrom.go): the lease-expiry scans'.
var FullInterval = fullInterval

// ClaimInterval is the longest time between two full claims when the last
// ones took took (claimFrom.interval).
func ClaimInterval(took time.Duration) time.Duration {
	var c claimFrom
	return c.interval(took)
}

// SetRescueFullEvery sets how often s's lease-expiry scans start at the
// oldest lease at the least, in place of fullInterval (claimfrom.go).
func SetRescueFullEvery(s *Store, d time.Duration) {
	s.rescueFrom.mu.Lock()
	defer s.rescueFrom.mu.Unlock()
	s.rescueFrom.fullEvery = d
}

// RescueSQL and RescueFromSQL are the lease-expiry scan from the oldest
// lease and after a position (claimfrom.go).
var RescueSQL, RescueFromSQL = rescueSQL, rescueFromSQL

// RescueFromSlack is how far before its last complete scan's time a
// lease-expiry scan starts (claimfrom.go).
const RescueFromSlack = rescueFromSlack

// SetBulkWait sets how long s's bulk actions wait, in all, for rows that
// other transactions hold (bulk.go).
func SetBulkWait(s *Store, d time.Duration) { s.bulkWait = d }

// CopyMinJobs is the smallest batch Enqueue writes with COPY.
const CopyMinJobs = copyMinJobs

// FoldCounts folds every count delta written so far into the counts, as
// Tidy does first (foldCounts).
func (s *Store) FoldCounts(ctx context.Context) error { return s.foldCounts(ctx) }

// EchoPayload is what the NOTIFY of s's own enqueues says (a trailing
// one; one sent in an enqueue's statement adds ":" and a number), which
// s's listener passes over (echoes).
func EchoPayload(s *Store) string { return s.echoes.prefix }

// FlushNotify sends s's trailing NOTIFY now if one is scheduled.
func FlushNotify(s *Store) { s.notify.flush() }
