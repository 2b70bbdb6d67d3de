package postgres

import "github.com/jackc/pgx/v5"

// ClaimTx exposes claimTx to the tests of package postgres_test.
var ClaimTx = claimTx

// ClaimSQL is the claim statement, for EXPLAIN in benchmarks.
var ClaimSQL = claimSQL

// HotMode is the exec mode of s's hot-path statements.
func HotMode(s *Store) pgx.QueryExecMode { return s.hotMode }

// Listens reports whether s holds a LISTEN session for Subscribe.
func Listens(s *Store) bool { return !s.noListen }
