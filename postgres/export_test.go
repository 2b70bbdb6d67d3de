package postgres

import "time"

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

// ListTagSQL is sql/list_tag.sql, for TestExplainListByTag.
var ListTagSQL = listTagSQL
