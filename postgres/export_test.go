package postgres

// ClaimTx exposes claimTx to the tests of package postgres_test.
var ClaimTx = claimTx

// ClaimSQL is the claim statement, for EXPLAIN in benchmarks.
var ClaimSQL = claimSQL
